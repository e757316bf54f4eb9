// Small string helpers shared by the CLI, the config validator and the manifest reader.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shoplens {

std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word`, if it is close enough to be a plausible typo.
std::optional<std::string> nearest_name(std::string_view word, const std::vector<std::string>& candidates);

// " (did you mean 'x'?)" or "" - appended to error messages.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

std::string_view trim(std::string_view s);
std::vector<std::string> split(std::string_view s, char sep);
std::string join(const std::vector<std::string>& parts, std::string_view sep);
std::string to_lower(std::string_view s);
// "0", "1", ... "count-1": the names of classes nobody named.
std::vector<std::string> numbered_names(int count);

// "24GiB", "512MB", "1024" -> bytes. Throws UsageError naming `what` on a bad value.
std::size_t parse_bytes(std::string_view text, std::string_view what);
std::string format_bytes(double bytes);
std::string format_duration(double seconds);

// Text made safe inside XML/HTML markup and attribute values (&, <, >, quotes escaped; control
// characters other than tab and newlines, which XML 1.0 forbids, become spaces).
std::string xml_escape(std::string_view text);

}  // namespace shoplens
