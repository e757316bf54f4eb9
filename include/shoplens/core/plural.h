// A count with its noun in the right number, for every user-facing message: "1 chunk",
// "3 chunks", "1 batch", "2 batches". One helper, so no message says "1 files" or "file(s)".
#pragma once

#include <string>
#include <string_view>
#include <type_traits>

namespace shoplens {

// Only the noun, for a count printed apart from it ("3 of 4 steps"): `singular` when n is 1;
// `plural` empty: the singular with an "s" (nouns that take "es" or change pass their plural).
template <class Count>
std::string noun_for(Count n, std::string_view singular, std::string_view plural = {}) {
  static_assert(std::is_integral_v<Count>, "a count is a whole number");
  if (n == Count{1}) return std::string(singular);
  return plural.empty() ? std::string(singular) + "s" : std::string(plural);
}

// "1 chunk", "0 chunks", "2 batches" (count_of(2, "batch", "batches")).
template <class Count>
std::string count_of(Count n, std::string_view singular, std::string_view plural = {}) {
  return std::to_string(n) + " " + noun_for(n, singular, plural);
}

}  // namespace shoplens
