#include "shoplens/core/strings.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "shoplens/core/byte_size.h"
#include "shoplens/core/errors.h"

namespace shoplens {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t subst = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, subst});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::optional<std::string> nearest_name(std::string_view word, const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  std::size_t best_distance = std::string::npos;
  for (const auto& candidate : candidates) {
    std::size_t d = edit_distance(to_lower(word), to_lower(candidate));
    // A prefix ("make" for "make-data") is a plausible intent even when the distance is large.
    if (candidate.size() > word.size() && to_lower(candidate).rfind(to_lower(word), 0) == 0 && word.size() >= 3)
      d = std::min<std::size_t>(d, 1);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  const std::size_t limit = std::max<std::size_t>(2, word.size() / 3);
  if (!best || best_distance > limit) return std::nullopt;
  return best;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  auto best = nearest_name(word, candidates);
  return best ? " (did you mean '" + *best + "'?)" : std::string();
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    std::size_t pos = s.find(sep, start);
    out.emplace_back(s.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

std::string to_lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::size_t parse_bytes(std::string_view text, std::string_view what) {
  std::string t = to_lower(trim(text));
  std::size_t pos = 0;
  double value = 0;
  try {
    value = std::stod(t, &pos);
  } catch (const std::exception&) {
    throw UsageError(std::string(what) + ": '" + std::string(text) + "' is not a size (examples: 512MiB, 24GiB)");
  }
  std::string unit(trim(std::string_view(t).substr(pos)));
  double scale = 1;
  if (unit.empty() || unit == "b")
    scale = 1;
  else if (unit == "k" || unit == "kib")
    scale = 1024.0;
  else if (unit == "m" || unit == "mib")
    scale = 1024.0 * 1024;
  else if (unit == "g" || unit == "gib")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "t" || unit == "tib")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "kb")
    scale = 1e3;
  else if (unit == "mb")
    scale = 1e6;
  else if (unit == "gb")
    scale = 1e9;
  else if (unit == "tb")
    scale = 1e12;
  else
    throw UsageError(std::string(what) + ": unknown unit '" + unit + "' in '" + std::string(text) + "'");
  if (value < 0 || !std::isfinite(value))
    throw UsageError(std::string(what) + ": size must be non-negative, got '" + std::string(text) + "'");
  return static_cast<std::size_t>(value * scale);
}

ByteSize parse_byte_size(std::string_view text, std::string_view what) {
  if (trim(text).empty()) return {};
  return ByteSize{static_cast<std::uint64_t>(parse_bytes(text, what))};
}

std::string byte_size_text(ByteSize size) {
  if (!size.is_set()) return "";
  const std::pair<std::uint64_t, const char*> units[] = {
      {1ULL << 40, "TiB"}, {1ULL << 30, "GiB"}, {1ULL << 20, "MiB"}, {1ULL << 10, "KiB"}};
  for (const auto& [scale, unit] : units)
    if (size.bytes % scale == 0) return std::to_string(size.bytes / scale) + unit;
  return std::to_string(size.bytes);
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return buf;
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  long s = std::lround(seconds);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%02ld:%02ld", s / 60, s % 60);
  return buf;
}

std::vector<std::string> numbered_names(int count) {
  std::vector<std::string> names;
  names.reserve(static_cast<std::size_t>(std::max(count, 0)));
  for (int i = 0; i < count; ++i) names.push_back(std::to_string(i));
  return names;
}

std::string xml_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // Control characters are not allowed in XML 1.0; keep tab and newline.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r')
          out += ' ';
        else
          out += c;
    }
  }
  return out;
}

}  // namespace shoplens
