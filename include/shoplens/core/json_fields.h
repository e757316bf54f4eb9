// Checked reads of one JSON object's fields from a file users write (benchmark records, price
// table rows, model cards, ledger lines): one reader, so every such file refuses a field the same
// way, naming where (file:line or the row) and the key, with the error type of its caller (`Err`:
// DataError, ConfigError). A nested object is read through section(), which names its keys by
// their dotted path ("architecture.image_size").
#pragma once

#include <cmath>
#include <cstdint>
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

  // The object read, for what the checked reads do not cover (its keys, when they are data).
  const nlohmann::json& object() const { return object_; }

  // Trimmed. Absent or null: "" unless `required` ("missing"); required and blank: "is empty".
  std::string text(const char* key, bool required) const {
    if (absent(key)) {
      if (required) fail(fmt::format("missing \"{}\"", name(key)));
      return std::string();
    }
    if (!object_[key].is_string()) fail(fmt::format("\"{}\" must be a string", name(key)));
    std::string value(trim(object_[key].get<std::string>()));
    if (required && value.empty()) fail(fmt::format("\"{}\" is empty", name(key)));
    return value;
  }

  // Absent or null: nullopt; otherwise a number.
  std::optional<double> number(const char* key) const {
    if (absent(key)) return std::nullopt;
    if (!object_[key].is_number()) fail(fmt::format("\"{}\" must be a number", name(key)));
    return object_[key].get<double>();
  }

  // Present, finite and above 0.
  double positive(const char* key) const {
    const auto value = number(key);
    if (!value) fail(fmt::format("missing \"{}\"", name(key)));
    if (!(*value > 0) || !std::isfinite(*value)) fail(fmt::format("{} {} must be > 0", name(key), *value));
    return *value;
  }

  // Counts, not sizes: far below INT_MAX, so whole_number's cast cannot overflow.
  static constexpr int kLargestWholeNumber = 1000000000;

  // Absent or null: `fallback`; otherwise a whole number from `minimum` to kLargestWholeNumber.
  int whole_number(const char* key, int minimum, int fallback) const {
    const auto value = number(key);
    if (!value) return fallback;
    if (*value > kLargestWholeNumber)
      fail(fmt::format("\"{}\" must be a whole number from {} to {}", name(key), minimum, kLargestWholeNumber));
    if (*value < minimum || *value != std::floor(*value))
      fail(fmt::format("\"{}\" must be a whole number >= {}", name(key), minimum));
    return static_cast<int>(*value);
  }

  // Present and a JSON integer (no fraction or exponent) from `minimum` to `maximum`: exact over
  // the whole int64 range, where number() would round through a double.
  std::int64_t integer(const char* key, std::int64_t minimum, std::int64_t maximum) const {
    const nlohmann::json& value = required(key);
    const bool fits =
        value.is_number_unsigned()
            ? maximum >= 0 && value.get<std::uint64_t>() <= static_cast<std::uint64_t>(maximum) &&
                  (minimum <= 0 || value.get<std::uint64_t>() >= static_cast<std::uint64_t>(minimum))
            : value.is_number_integer() && value.get<std::int64_t>() >= minimum && value.get<std::int64_t>() <= maximum;
    if (!fits)
      fail(fmt::format("\"{}\" must be a whole number from {} to {}, got {}", name(key), minimum, maximum,
                       describe(value)));
    return value.get<std::int64_t>();
  }

  // Present, finite and from `minimum` to `maximum`.
  double number_in(const char* key, double minimum, double maximum) const {
    const nlohmann::json& value = required(key);
    if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < minimum ||
        value.get<double>() > maximum)
      fail(fmt::format("\"{}\" must be a number from {} to {}, got {}", name(key), minimum, maximum, describe(value)));
    return value.get<double>();
  }

  // Absent or null: `fallback`; otherwise true or false.
  bool flag(const char* key, bool fallback) const {
    if (absent(key)) return fallback;
    if (!object_[key].is_boolean()) fail(fmt::format("\"{}\" must be true or false", name(key)));
    return object_[key].get<bool>();
  }

  // Present and an array of `min_size` to `max_size` elements; its elements are the caller's to check.
  const nlohmann::json& array(const char* key, std::size_t min_size, std::size_t max_size) const {
    const nlohmann::json& value = required(key);
    if (!value.is_array() || value.size() < min_size || value.size() > max_size)
      fail(fmt::format("\"{}\" must be an array of {} to {} elements, got {}", name(key), min_size, max_size,
                       describe(value)));
    return value;
  }

  // The object under `key` (present), whose fields are then named "key.field".
  JsonFields section(const char* key) const {
    const nlohmann::json& value = required(key);
    if (!value.is_object()) fail(fmt::format("\"{}\" must be an object, got {}", name(key), describe(value)));
    return JsonFields(value, where_, name(key) + ".");
  }

  // The key as messages name it: its dotted path from the top object.
  std::string name(const std::string& key) const { return prefix_ + key; }

  // A value as an error message shows it: a number or short text as written, anything else by its kind.
  static std::string describe(const nlohmann::json& value) {
    if (value.is_number() || value.is_boolean() || value.is_null()) return value.dump();
    if (value.is_string() && value.get_ref<const std::string&>().size() <= 40) return value.dump();
    if (value.is_array()) return fmt::format("an array of {}", value.size());
    return fmt::format("a {}", value.type_name());
  }

 private:
  JsonFields(const nlohmann::json& object, std::string where, std::string prefix)
      : object_(object), where_(std::move(where)), prefix_(std::move(prefix)) {}

  bool absent(const char* key) const {
    return !object_.is_object() || !object_.contains(key) || object_[key].is_null();
  }

  const nlohmann::json& required(const char* key) const {
    if (absent(key)) fail(fmt::format("missing \"{}\"", name(key)));
    return object_[key];
  }

  const nlohmann::json& object_;
  std::string where_;
  std::string prefix_;  // "section." for a section's fields
};

}  // namespace shoplens
