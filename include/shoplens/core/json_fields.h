// The one checked reader of the JSON files ShopLens reads (configs, bench configs, model cards,
// dataset.json and text_dataset.json, price tables, bench records, ledger lines, run summaries):
// every such file refuses a field in the same words, naming where (the file, file:line or the row),
// the key by its dotted path ("architecture.image_size", "shards[2].count") and what was there,
// with the error type of its caller (`Err`: DataError, ConfigError):
//
//   WHERE: PATH: expected TYPE, got JSONTYPE VALUE        a value of the wrong type or range
//   WHERE: PATH: 'VALUE' is not one of A, B, C (did you mean 'B'?)
//   WHERE: unknown key 'PATH' (did you mean 'NEAR'?)
//   WHERE: missing "PATH"
//
// JsonValue<Err> checks one value at a known path (the schema-driven readers: config.cpp's fields,
// bench configs' scenario keys); JsonFields<Err> reads one object's fields by key, a nested object
// through section(). TYPE is the schema's word: boolean, integer, number, string, list of numbers,
// list of strings, object of strings, object.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "shoplens/core/strings.h"

namespace shoplens {

template <class Err>
struct JsonValue {
  // A value as an error message shows it: its JSON type, then the value (long ones cut).
  static std::string describe(const nlohmann::json& value) {
    constexpr std::size_t kShown = 60;
    std::string text = value.dump();
    if (text.size() > kShown) text = text.substr(0, kShown) + "...";
    return std::string(value.type_name()) + " " + text;
  }

  [[noreturn]] static void fail(const std::string& where, const std::string& path, const std::string& what) {
    throw Err(where + ": " + path + ": " + what);
  }
  // "WHERE: PATH: expected EXPECTED, got TYPE VALUE"
  [[noreturn]] static void type_error(const std::string& where, const std::string& path, const std::string& expected,
                                      const nlohmann::json& value) {
    fail(where, path, "expected " + expected + ", got " + describe(value));
  }
  // "WHERE: unknown key 'KEY' (did you mean 'NEAR'?)"; KEY as the caller names it (its dotted path).
  [[noreturn]] static void unknown_key(const std::string& where, const std::string& key, const std::string& word,
                                       const std::vector<std::string>& known) {
    throw Err(where + ": unknown key '" + key + "'" + did_you_mean(word, known));
  }

  // The typed reads, one per type a field may have; `out` is set only when the value fits.
  static void read(const nlohmann::json& v, bool& out, const std::string& path, const std::string& where) {
    if (!v.is_boolean()) type_error(where, path, "boolean", v);
    out = v.get<bool>();
  }
  // A whole number within int's range (|v| <= 2e9); 3.0 counts, 3.5 does not.
  static void read(const nlohmann::json& v, int& out, const std::string& path, const std::string& where) {
    if (!v.is_number() || std::floor(v.get<double>()) != v.get<double>() || std::fabs(v.get<double>()) > 2e9)
      type_error(where, path, "integer", v);
    out = static_cast<int>(v.get<double>());
  }
  // Exact over int64 when written as an integer.
  static void read(const nlohmann::json& v, std::int64_t& out, const std::string& path, const std::string& where) {
    if (v.is_number_integer() && !(v.is_number_unsigned() && v.get<std::uint64_t>() > INT64_MAX)) {
      out = v.get<std::int64_t>();
      return;
    }
    if (!v.is_number() || std::floor(v.get<double>()) != v.get<double>() || std::fabs(v.get<double>()) >= 9.2e18)
      type_error(where, path, "integer", v);
    out = static_cast<std::int64_t>(v.get<double>());
  }
  // Counts, sizes and checksums: a JSON integer from 0 to the type's largest value.
  static void read(const nlohmann::json& v, std::uint64_t& out, const std::string& path, const std::string& where) {
    if (!unsigned_integer(v)) type_error(where, path, "a whole number >= 0", v);
    out = v.get<std::uint64_t>();
  }
  static void read(const nlohmann::json& v, std::uint32_t& out, const std::string& path, const std::string& where) {
    if (!unsigned_integer(v) || v.get<std::uint64_t>() > UINT32_MAX)
      type_error(where, path, "a whole number from 0 to 4294967295", v);
    out = static_cast<std::uint32_t>(v.get<std::uint64_t>());
  }
  static void read(const nlohmann::json& v, double& out, const std::string& path, const std::string& where) {
    if (!v.is_number()) type_error(where, path, "number", v);
    out = v.get<double>();
  }
  static void read(const nlohmann::json& v, std::string& out, const std::string& path, const std::string& where) {
    if (!v.is_string()) type_error(where, path, "string", v);
    out = v.get<std::string>();
  }
  static void read(const nlohmann::json& v, std::vector<double>& out, const std::string& path,
                   const std::string& where) {
    read_list(v, out, path, where, "list of numbers");
  }
  static void read(const nlohmann::json& v, std::vector<std::string>& out, const std::string& path,
                   const std::string& where) {
    read_list(v, out, path, where, "list of strings");
  }
  static void read(const nlohmann::json& v, std::vector<std::uint64_t>& out, const std::string& path,
                   const std::string& where) {
    read_list(v, out, path, where, "list of whole numbers >= 0");
  }
  static void read(const nlohmann::json& v, std::vector<std::vector<std::string>>& out, const std::string& path,
                   const std::string& where) {
    read_list(v, out, path, where, "list of lists of strings");
  }
  template <std::size_t N>
  static void read(const nlohmann::json& v, std::array<double, N>& out, const std::string& path,
                   const std::string& where) {
    if (!v.is_array() || v.size() != N) type_error(where, path, fmt::format("list of {} numbers", N), v);
    for (std::size_t i = 0; i < N; ++i) read(v[i], out[i], fmt::format("{}[{}]", path, i), where);
  }
  static void read(const nlohmann::json& v, std::map<std::string, std::string>& out, const std::string& path,
                   const std::string& where) {
    if (!v.is_object()) type_error(where, path, "object of strings", v);
    std::map<std::string, std::string> values;
    for (auto it = v.begin(); it != v.end(); ++it) read(it.value(), values[it.key()], path + "." + it.key(), where);
    out = std::move(values);
  }

  // A JSON integer (no fraction or exponent) from `minimum` to `maximum`: exact over the whole int64
  // range, where a double would round. "expected a whole number from 1 to 5, got number 1.5".
  static std::int64_t integer(const nlohmann::json& v, std::int64_t minimum, std::int64_t maximum,
                              const std::string& path, const std::string& where) {
    const bool fits =
        v.is_number_unsigned()
            ? maximum >= 0 && v.get<std::uint64_t>() <= static_cast<std::uint64_t>(maximum) &&
                  (minimum <= 0 || v.get<std::uint64_t>() >= static_cast<std::uint64_t>(minimum))
            : v.is_number_integer() && v.get<std::int64_t>() >= minimum && v.get<std::int64_t>() <= maximum;
    if (!fits) type_error(where, path, fmt::format("a whole number from {} to {}", minimum, maximum), v);
    return v.get<std::int64_t>();
  }

  // A string that must be one of `choices`: "'fp8' is not one of fp32, bf16, fp16 (did you mean 'fp16'?)".
  static std::string choice(const nlohmann::json& v, const std::vector<std::string>& choices, const std::string& path,
                            const std::string& where) {
    std::string value;
    read(v, value, path, where);
    for (const auto& c : choices)
      if (c == value) return value;
    fail(where, path, "'" + value + "' is not one of " + join(choices, ", ") + did_you_mean(value, choices));
  }

 private:
  // A JSON integer >= 0 (parsed files hold them unsigned; documents built in code, signed).
  static bool unsigned_integer(const nlohmann::json& v) {
    return v.is_number_unsigned() || (v.is_number_integer() && v.get<std::int64_t>() >= 0);
  }

  template <class T>
  static void read_list(const nlohmann::json& v, std::vector<T>& out, const std::string& path, const std::string& where,
                        const char* expected) {
    if (!v.is_array()) type_error(where, path, expected, v);
    std::vector<T> values(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) read(v[i], values[i], fmt::format("{}[{}]", path, i), where);
    out = std::move(values);
  }
};

template <class Err>
class JsonFields {
 public:
  using Value = JsonValue<Err>;

  // `object` must outlive the reader. `where` names the file (or file:line, or the row).
  JsonFields(const nlohmann::json& object, std::string where) : object_(object), where_(std::move(where)) {}

  [[noreturn]] void fail(const std::string& what) const { throw Err(where_ + ": " + what); }
  // "WHERE: PATH: what" for the field `key` (or "key[i]", "key.sub": any path below this object).
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    Value::fail(where_, name(key), what);
  }
  // "WHERE: PATH: expected EXPECTED, got TYPE VALUE" for the field `key`.
  [[noreturn]] void type_error(const std::string& key, const std::string& expected, const nlohmann::json& value) const {
    Value::type_error(where_, name(key), expected, value);
  }

  // The object read, for what the checked reads do not cover (its keys, when they are data).
  const nlohmann::json& object() const { return object_; }
  const std::string& where() const { return where_; }

  // The object itself must be a JSON object: "WHERE: expected object, got TYPE VALUE".
  void expect_object(const char* what = "object") const {
    if (!object_.is_object()) throw Err(where_ + ": expected " + what + ", got " + Value::describe(object_));
  }

  // Every key of the object must be one of `known`: "WHERE: unknown key 'PATH' (did you mean 'NEAR'?)".
  void check_keys(const std::vector<std::string>& known) const {
    expect_object();
    for (auto it = object_.begin(); it != object_.end(); ++it)
      if (std::find(known.begin(), known.end(), it.key()) == known.end())
        Value::unknown_key(where_, name(it.key()), it.key(), known);
  }

  // Present (not null) and a T (JsonValue::read's types).
  template <class T>
  T get(const char* key) const {
    T out{};
    Value::read(required(key), out, name(key), where_);
    return out;
  }
  // Absent or null: `fallback`; otherwise a T.
  template <class T>
  T get_or(const char* key, T fallback) const {
    if (absent(key)) return fallback;
    Value::read(object_[key], fallback, name(key), where_);
    return fallback;
  }
  // Present and one of `choices`.
  std::string choice(const char* key, const std::vector<std::string>& choices) const {
    return Value::choice(required(key), choices, name(key), where_);
  }

  // Trimmed. Absent or null: "" unless `required` ("missing"); required and blank: an error.
  std::string text(const char* key, bool required) const {
    if (absent(key)) {
      if (required) fail(fmt::format("missing \"{}\"", name(key)));
      return std::string();
    }
    std::string value(trim(get<std::string>(key)));
    if (required && value.empty()) Value::type_error(where_, name(key), "a non-empty string", object_[key]);
    return value;
  }

  // Absent or null: nullopt; otherwise a number.
  std::optional<double> number(const char* key) const {
    if (absent(key)) return std::nullopt;
    return get<double>(key);
  }

  // Present, finite and above 0.
  double positive(const char* key) const {
    const double value = get<double>(key);
    if (!(value > 0) || !std::isfinite(value)) Value::type_error(where_, name(key), "a number > 0", object_[key]);
    return value;
  }

  // Counts, not sizes: far below INT_MAX, so whole_number's cast cannot overflow.
  static constexpr int kLargestWholeNumber = 1000000000;

  // Absent or null: `fallback`; otherwise a whole number from `minimum` to kLargestWholeNumber.
  // (3.0 counts, as any number with no fraction).
  int whole_number(const char* key, int minimum, int fallback) const {
    if (absent(key)) return fallback;
    const nlohmann::json& value = object_[key];
    if (!value.is_number() || value.get<double>() < minimum || value.get<double>() > kLargestWholeNumber ||
        value.get<double>() != std::floor(value.get<double>()))
      Value::type_error(where_, name(key), fmt::format("a whole number from {} to {}", minimum, kLargestWholeNumber),
                        value);
    return static_cast<int>(value.get<double>());
  }

  // Present and a JSON integer (no fraction or exponent) from `minimum` to `maximum`: exact over
  // the whole int64 range, where a double would round.
  std::int64_t integer(const char* key, std::int64_t minimum, std::int64_t maximum) const {
    return Value::integer(required(key), minimum, maximum, name(key), where_);
  }

  // Present, finite and from `minimum` to `maximum`.
  double number_in(const char* key, double minimum, double maximum) const {
    const nlohmann::json& value = required(key);
    if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < minimum ||
        value.get<double>() > maximum)
      Value::type_error(where_, name(key), fmt::format("a number from {} to {}", minimum, maximum), value);
    return value.get<double>();
  }

  // Absent or null: `fallback`; otherwise true or false.
  bool flag(const char* key, bool fallback) const { return get_or<bool>(key, fallback); }

  // Present and an array of `min_size` to `max_size` elements; its elements are the caller's to
  // check (element(): "PATH[i]").
  const nlohmann::json& array(const char* key, std::size_t min_size, std::size_t max_size) const {
    const nlohmann::json& value = required(key);
    if (!value.is_array() || value.size() < min_size || value.size() > max_size)
      Value::type_error(where_, name(key), fmt::format("an array of {} to {} elements", min_size, max_size), value);
    return value;
  }

  // Present and a list (a JSON array) of any length.
  const nlohmann::json& list(const char* key) const {
    const nlohmann::json& value = required(key);
    if (!value.is_array()) Value::type_error(where_, name(key), "list", value);
    return value;
  }

  // The object under `key` (present), whose fields are then named "key.field".
  JsonFields section(const char* key) const {
    const nlohmann::json& value = required(key);
    if (!value.is_object()) Value::type_error(where_, name(key), "object", value);
    return JsonFields(value, where_, name(key) + ".");
  }
  // Element `i` of the array under `key`, an object whose fields are named "key[i].field".
  JsonFields element(const char* key, std::size_t i) const {
    const nlohmann::json& value = object_.at(key).at(i);
    const std::string path = fmt::format("{}[{}]", name(key), i);
    if (!value.is_object()) Value::type_error(where_, path, "object", value);
    return JsonFields(value, where_, path + ".");
  }

  // The key as messages name it: its dotted path from the top object.
  std::string name(const std::string& key) const { return prefix_ + key; }

  // A value as an error message shows it (JsonValue::describe).
  static std::string describe(const nlohmann::json& value) { return Value::describe(value); }

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
