#include "shoplens/core/utf8.h"

#include <cstdint>
#include <cstdio>

#include <nlohmann/json.hpp>

namespace shoplens {
namespace {

// Length of the well-formed UTF-8 sequence at text[at], or 0 when the byte there does not start
// one (the ranges are RFC 3629's table, which excludes overlongs and surrogates).
std::size_t sequence_length(std::string_view text, std::size_t at) {
  auto byte = [&](std::size_t i) { return static_cast<std::uint8_t>(text[i]); };
  const std::uint8_t b0 = byte(at);
  if (b0 < 0x80) return 1;
  std::size_t length = 0;
  std::uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF)
    length = 2;
  else if (b0 == 0xE0)
    length = 3, lo = 0xA0;  // no overlong forms
  else if (b0 == 0xED)
    length = 3, hi = 0x9F;  // no UTF-16 surrogates
  else if (b0 >= 0xE1 && b0 <= 0xEF)
    length = 3;
  else if (b0 == 0xF0)
    length = 4, lo = 0x90;  // no overlong forms
  else if (b0 == 0xF4)
    length = 4, hi = 0x8F;  // nothing above U+10FFFF
  else if (b0 >= 0xF1 && b0 <= 0xF3)
    length = 4;
  else
    return 0;
  if (at + length > text.size()) return 0;
  if (byte(at + 1) < lo || byte(at + 1) > hi) return 0;
  for (std::size_t i = 2; i < length; ++i)
    if (byte(at + i) < 0x80 || byte(at + i) > 0xBF) return 0;
  return length;
}

void escape_strings(nlohmann::json& node) {
  if (node.is_string()) {
    const auto& text = node.get_ref<const std::string&>();
    if (!is_valid_utf8(text)) node = escape_invalid_utf8(text);
  } else if (node.is_array()) {
    for (auto& element : node) escape_strings(element);
  } else if (node.is_object()) {
    nlohmann::json escaped = nlohmann::json::object();
    for (auto it = node.begin(); it != node.end(); ++it) {
      escape_strings(it.value());
      escaped[escape_invalid_utf8(it.key())] = std::move(it.value());
    }
    node = std::move(escaped);
  }
}

}  // namespace

bool is_valid_utf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = sequence_length(text, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string escape_invalid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = sequence_length(text, i);
    if (n > 0) {
      out.append(text.substr(i, n));
      i += n;
      continue;
    }
    char hex[8];
    std::snprintf(hex, sizeof hex, "\\x%02X", static_cast<unsigned>(static_cast<std::uint8_t>(text[i])));
    out += hex;
    ++i;
  }
  return out;
}

std::string dump_json_escaped(const nlohmann::json& doc, int indent) {
  nlohmann::json copy = doc;
  escape_strings(copy);
  return copy.dump(indent);
}

}  // namespace shoplens
