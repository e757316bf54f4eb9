#include "shoplens/core/price_table.h"

#include <cmath>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/json_fields.h"
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

const std::vector<std::string> kRowKeys = {"name",          "provider", "kind",   "accelerator",
                                           "accelerators",  "vcpus",    "region", "on_demand_per_hour",
                                           "spot_per_hour", "source",   "date",   "note"};

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

namespace {

// Reads one offers[] row's fields; every error names the row.
using OfferRow = JsonFields<ConfigError>;

void read_prices(const OfferRow& row, PriceOffer& o) {
  o.on_demand_per_hour = row.positive("on_demand_per_hour");
  o.spot_per_hour = row.number("spot_per_hour");
  if (!o.spot_per_hour) return;
  if (!(*o.spot_per_hour > 0) || !std::isfinite(*o.spot_per_hour))
    row.type_error("spot_per_hour", "a number > 0 (leave it out or null where there is no spot price)",
                   row.object()["spot_per_hour"]);
  if (*o.spot_per_hour > o.on_demand_per_hour)
    row.fail("spot_per_hour",
             fmt::format("{} is above on_demand_per_hour {}: swapped?", *o.spot_per_hour, o.on_demand_per_hour));
}

PriceOffer read_offer(const json& row, const std::string& where) {
  const OfferRow r(row, where);
  r.check_keys(kRowKeys);
  PriceOffer o;
  o.name = r.text("name", true);
  o.provider = r.text("provider", true);
  o.kind = r.choice("kind", {"cpu", "gpu", "tpu"});
  o.accelerator = r.text("accelerator", false);
  o.region = r.text("region", false);
  o.note = r.text("note", false);
  // Every figure must be traceable: where it was read and when.
  o.source = r.text("source", true);
  o.date = r.text("date", true);
  if (!valid_date(o.date)) r.fail("date", "'" + o.date + "' is not YYYY-MM-DD or YYYY-MM");
  read_prices(r, o);
  o.accelerators = r.whole_number("accelerators", 0, 0);
  if (o.kind != "cpu" && o.accelerators < 1) r.fail("accelerators", "a " + o.kind + " offer needs at least 1");
  if (o.kind == "cpu" && o.accelerators != 0) r.fail("accelerators", "a cpu offer has 0");
  o.vcpus = r.whole_number("vcpus", 0, 0);
  return o;
}

}  // namespace

PriceTable parse_price_table(std::string_view text, const std::string& origin) {
  if (json_nesting_exceeds(text))
    throw ConfigError(origin + ": nests deeper than " + std::to_string(kMaxJsonNesting) + " levels");
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
    const bool named = row.is_object() && row.contains("name") && row["name"].is_string();
    const std::string where =
        fmt::format("{}: offers[{}]{}", origin, index, named ? " ('" + row["name"].get<std::string>() + "')" : "");
    PriceOffer o = read_offer(row, where);
    if (!seen.insert(o.name).second) throw ConfigError(where + ": duplicate name '" + o.name + "'");
    table.offers.push_back(std::move(o));
    ++index;
  }
  return table;
}

PriceTable load_price_table(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw ConfigError("price table " + path.string() + " does not exist");
  return parse_price_table(read_file(path), path.string());
}

double cost_per_million_images(double price_per_hour, double images_per_second) {
  if (!(price_per_hour > 0)) throw UsageError(fmt::format("price per hour {} must be > 0", price_per_hour));
  if (!(images_per_second > 0)) throw UsageError(fmt::format("throughput {} images/s must be > 0", images_per_second));
  return price_per_hour / (images_per_second * 3600.0) * 1e6;
}

}  // namespace shoplens
