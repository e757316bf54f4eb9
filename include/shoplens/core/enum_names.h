// An enum's names as one table read both ways: the name of a value, and the value of a name (a
// table may list aliases after a value's first name; the first is the one printed).
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

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

}  // namespace shoplens
