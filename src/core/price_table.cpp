#include "shoplens/core/price_table.h"

#include <cmath>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/json_limits.h"
#include "shoplens/core/strings.h"

namespace shoplens {
namespace {

using json = nlohmann::json;

// YYYY-MM-DD or YYYY-MM with a plausible month and day: a price without a date cannot be judged
// for staleness, and a free-form date cannot be sorted.
bool valid_date(const std::string& d) {
  auto digits = [&](std::size_t from, std::size_t n) {
    for (std::size_t i = from; i < from + n; ++i)
      if (i >= d.size() || d[i] < '0' || d[i] > '9') return false;
    return true;
  };
  if (!(d.size() == 7 || d.size() == 10) || !digits(0, 4) || d[4] != '-' || !digits(5, 2)) return false;
  const int month = std::stoi(d.substr(5, 2));
  if (month < 1 || month > 12) return false;
  if (d.size() == 7) return true;
  if (d[7] != '-' || !digits(8, 2)) return false;
  const int day = std::stoi(d.substr(8, 2));
  return day >= 1 && day <= 31;
}

const std::vector<std::string> kRowKeys = {"name",   "provider",           "kind",          "accelerator",
                                           "accelerators", "vcpus",      "region",        "on_demand_per_hour",
                                           "spot_per_hour", "source",     "date",          "note"};

}  // namespace

PriceBasis parse_price_basis(std::string_view text) {
  if (text == "on-demand") return PriceBasis::kOnDemand;
  if (text == "spot") return PriceBasis::kSpot;
  throw UsageError(fmt::format("price basis '{}': expected on-demand or spot", text));
}

std::string to_string(PriceBasis basis) { return basis == PriceBasis::kSpot ? "spot" : "on-demand"; }

double PriceOffer::per_hour(PriceBasis basis) const {
  if (basis == PriceBasis::kOnDemand) return on_demand_per_hour;
  if (!spot_per_hour)
    throw UsageError(fmt::format("price table row '{}' has no spot price; use the on-demand basis", name));
  return *spot_per_hour;
}

const PriceOffer& PriceTable::find(std::string_view name) const {
  std::vector<std::string> names;
  for (const auto& o : offers) {
    if (o.name == name) return o;
    names.push_back(o.name);
  }
  throw ConfigError(fmt::format("{}: no row named '{}'{}", origin, name, did_you_mean(name, names)));
}

PriceTable parse_price_table(std::string_view text, const std::string& origin) {
  if (json_nesting_exceeds(text)) throw ConfigError(origin + ": nests deeper than " + std::to_string(kMaxJsonNesting) + " levels");
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    throw ConfigError(fmt::format("{}: not valid JSON: {}", origin, e.what()));
  }
  if (!doc.is_object() || !doc.contains("offers") || !doc["offers"].is_array())
    throw ConfigError(origin + ": expected an object with an \"offers\" array");
  if (doc.contains("format") && doc["format"] != "shoplens-prices")
    throw ConfigError(origin + ": \"format\" is " + doc["format"].dump() + ", expected \"shoplens-prices\"");
  PriceTable table;
  table.origin = origin;
  table.currency = doc.value("currency", "USD");
  if (doc["offers"].empty()) throw ConfigError(origin + ": \"offers\" is empty");

  std::set<std::string> seen;
  std::size_t index = 0;
  for (const json& row : doc["offers"]) {
    const std::string where =
        fmt::format("{}: offers[{}]{}", origin, index,
                    row.is_object() && row.contains("name") && row["name"].is_string()
                        ? " ('" + row["name"].get<std::string>() + "')"
                        : "");
    auto fail = [&](const std::string& what) { throw ConfigError(where + ": " + what); };
    if (!row.is_object()) fail("expected an object");
    for (const auto& [key, value] : row.items())
      if (std::find(kRowKeys.begin(), kRowKeys.end(), key) == kRowKeys.end())
        fail("unknown field '" + key + "'" + did_you_mean(key, kRowKeys));
    auto text_field = [&](const char* key, bool required) {
      if (!row.contains(key) || row[key].is_null()) {
        if (required) fail(std::string("missing \"") + key + "\"");
        return std::string();
      }
      if (!row[key].is_string()) fail(std::string("\"") + key + "\" must be a string");
      const std::string value(trim(row[key].get<std::string>()));
      if (required && value.empty()) fail(std::string("\"") + key + "\" is empty");
      return value;
    };
    auto number_field = [&](const char* key) -> std::optional<double> {
      if (!row.contains(key) || row[key].is_null()) return std::nullopt;
      if (!row[key].is_number()) fail(std::string("\"") + key + "\" must be a number");
      return row[key].get<double>();
    };

    PriceOffer o;
    o.name = text_field("name", true);
    o.provider = text_field("provider", true);
    o.kind = text_field("kind", true);
    o.accelerator = text_field("accelerator", false);
    o.region = text_field("region", false);
    o.note = text_field("note", false);
    // Every figure must be traceable: where it was read and when.
    o.source = text_field("source", true);
    o.date = text_field("date", true);
    if (!valid_date(o.date)) fail("\"date\" '" + o.date + "' is not YYYY-MM-DD or YYYY-MM");
    if (o.kind != "cpu" && o.kind != "gpu" && o.kind != "tpu") fail("\"kind\" '" + o.kind + "': expected cpu, gpu or tpu");

    const auto on_demand = number_field("on_demand_per_hour");
    if (!on_demand) fail("missing \"on_demand_per_hour\"");
    if (!(*on_demand > 0) || !std::isfinite(*on_demand)) fail(fmt::format("on_demand_per_hour {} must be > 0", *on_demand));
    o.on_demand_per_hour = *on_demand;
    o.spot_per_hour = number_field("spot_per_hour");
    if (o.spot_per_hour) {
      if (!(*o.spot_per_hour > 0) || !std::isfinite(*o.spot_per_hour))
        fail(fmt::format("spot_per_hour {} must be > 0 (leave it out or null where there is no spot price)", *o.spot_per_hour));
      if (*o.spot_per_hour > o.on_demand_per_hour)
        fail(fmt::format("spot_per_hour {} is above on_demand_per_hour {}: swapped?", *o.spot_per_hour, o.on_demand_per_hour));
    }
    const auto count = number_field("accelerators").value_or(0);
    if (count < 0 || count != std::floor(count)) fail("\"accelerators\" must be a whole number >= 0");
    o.accelerators = static_cast<int>(count);
    if (o.kind != "cpu" && o.accelerators < 1) fail("a " + o.kind + " offer needs \"accelerators\" >= 1");
    if (o.kind == "cpu" && o.accelerators != 0) fail("a cpu offer has \"accelerators\" 0");
    const auto vcpus = number_field("vcpus").value_or(0);
    if (vcpus < 0 || vcpus != std::floor(vcpus)) fail("\"vcpus\" must be a whole number >= 0");
    o.vcpus = static_cast<int>(vcpus);
    if (!seen.insert(o.name).second) fail("duplicate name '" + o.name + "'");
    table.offers.push_back(std::move(o));
    ++index;
  }
  return table;
}

PriceTable load_price_table(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw ConfigError("price table " + path.string() + " does not exist");
  return parse_price_table(read_file(path), path.string());
}

double cost_per_million_images(double price_per_hour, double images_per_second) {
  if (!(price_per_hour > 0)) throw UsageError(fmt::format("price per hour {} must be > 0", price_per_hour));
  if (!(images_per_second > 0)) throw UsageError(fmt::format("throughput {} images/s must be > 0", images_per_second));
  return price_per_hour / (images_per_second * 3600.0) * 1e6;
}

}  // namespace shoplens
