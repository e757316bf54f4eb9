// An enum's names as one table read both ways: the name of a value, and the value of a name (a
// table may list aliases after a value's first name; the first is the one printed).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shoplens/core/errors.h"
#include "shoplens/core/strings.h"

namespace shoplens {

template <class E>
struct EnumName {
  E value;
  const char* name;
};

// The first name `table` gives `value`, or `otherwise` for a value it does not list.
template <class E, std::size_t N>
constexpr const char* name_in(const EnumName<E> (&table)[N], E value, const char* otherwise = "?") {
  for (const auto& row : table)
    if (row.value == value) return row.name;
  return otherwise;
}

// The value `table` names `name` (exactly), or nullopt.
template <class E, std::size_t N>
constexpr std::optional<E> value_in(const EnumName<E> (&table)[N], std::string_view name) {
  for (const auto& row : table)
    if (name == row.name) return row.value;
  return std::nullopt;
}

// The value `table` names `name`, or a ConfigError "WHAT: 'NAME' is not one of A, B, C" with the
// nearest name: the one message every enum-like setting (config key, flag, scenario field) gives.
template <class E, std::size_t N>
E parse_enum(const EnumName<E> (&table)[N], std::string_view name, std::string_view what) {
  if (const auto value = value_in(table, name)) return *value;
  std::vector<std::string> names;
  for (const auto& row : table) names.emplace_back(row.name);
  throw ConfigError(std::string(what) + ": '" + std::string(name) + "' is not one of " + join(names, ", ") +
                    did_you_mean(std::string(name), names));
}

}  // namespace shoplens
