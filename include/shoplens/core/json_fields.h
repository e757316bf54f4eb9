// Checked reads of one JSON object's fields from a file users write (benchmark records, price
// table rows): one reader, so every such file refuses a field the same way, naming where (file:line
// or the row) and the key, with the error type of its caller (`Err`: DataError, ConfigError).
#pragma once

#include <cmath>
#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "shoplens/core/strings.h"

namespace shoplens {

template <class Err>
class JsonFields {
 public:
  // `object` must outlive the reader.
  JsonFields(const nlohmann::json& object, std::string where) : object_(object), where_(std::move(where)) {}

  [[noreturn]] void fail(const std::string& what) const { throw Err(where_ + ": " + what); }

  // Trimmed. Absent or null: "" unless `required` ("missing"); required and blank: "is empty".
  std::string text(const char* key, bool required) const {
    if (absent(key)) {
      if (required) fail(fmt::format("missing \"{}\"", key));
      return std::string();
    }
    if (!object_[key].is_string()) fail(fmt::format("\"{}\" must be a string", key));
    std::string value(trim(object_[key].get<std::string>()));
    if (required && value.empty()) fail(fmt::format("\"{}\" is empty", key));
    return value;
  }

  // Absent or null: nullopt; otherwise a number.
  std::optional<double> number(const char* key) const {
    if (absent(key)) return std::nullopt;
    if (!object_[key].is_number()) fail(fmt::format("\"{}\" must be a number", key));
    return object_[key].get<double>();
  }

  // Present, finite and above 0.
  double positive(const char* key) const {
    const auto value = number(key);
    if (!value) fail(fmt::format("missing \"{}\"", key));
    if (!(*value > 0) || !std::isfinite(*value)) fail(fmt::format("{} {} must be > 0", key, *value));
    return *value;
  }

  // Counts, not sizes: far below INT_MAX, so whole_number's cast cannot overflow.
  static constexpr int kLargestWholeNumber = 1000000000;

  // Absent or null: `fallback`; otherwise a whole number from `minimum` to kLargestWholeNumber.
  int whole_number(const char* key, int minimum, int fallback) const {
    const auto value = number(key);
    if (!value) return fallback;
    if (*value > kLargestWholeNumber)
      fail(fmt::format("\"{}\" must be a whole number from {} to {}", key, minimum, kLargestWholeNumber));
    if (*value < minimum || *value != std::floor(*value))
      fail(fmt::format("\"{}\" must be a whole number >= {}", key, minimum));
    return static_cast<int>(*value);
  }

 private:
  bool absent(const char* key) const { return !object_.contains(key) || object_[key].is_null(); }

  const nlohmann::json& object_;
  std::string where_;
};

}  // namespace shoplens
