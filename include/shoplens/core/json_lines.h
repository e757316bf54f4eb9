// JSON Lines read from outside the process (benchmark records and baselines): one reader, so every
// such file gets the same line numbers, comment rule and nesting limit.
#pragma once

#include <string>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "shoplens/core/json_limits.h"
#include "shoplens/core/strings.h"

namespace shoplens {

// Calls `visit(object, where)` for each line of `text` that is not blank or a `#` comment, with
// `where` = "origin:line" for the visitor's own errors. A line that nests deeper than
// kMaxJsonNesting, is not JSON or is not one object throws `Err` naming it.
template <class Err, class Visit>
void for_each_json_line(std::string_view text, const std::string& origin, Visit&& visit) {
  std::size_t line_no = 0;
  for (const auto& raw : split(text, '\n')) {
    ++line_no;
    const std::string line(trim(raw));
    if (line.empty() || line[0] == '#') continue;
    const std::string where = fmt::format("{}:{}", origin, line_no);
    if (json_nesting_exceeds(line))
      throw Err(where + ": nests deeper than " + std::to_string(kMaxJsonNesting) + " levels");
    nlohmann::json object;
    try {
      object = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      throw Err(where + ": not valid JSON: " + e.what());
    }
    if (!object.is_object()) throw Err(where + ": expected one JSON object per line");
    visit(object, where);
  }
}

}  // namespace shoplens
