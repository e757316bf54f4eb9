// The price table reader (configs/prices.json): every row traceable (source, date), positive
// prices, unique names, errors that name the file and the row; and the cost per million images.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "shoplens/core/errors.h"
#include "shoplens/core/price_table.h"
#include "test_util.h"

namespace shoplens {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

using json = nlohmann::json;

json valid_row(const std::string& name = "gpu-1x") {
  return {{"name", name},         {"provider", "Example"},
          {"kind", "gpu"},        {"accelerator", "A100-40GB"},
          {"accelerators", 1},    {"vcpus", 12},
          {"region", "r1"},       {"on_demand_per_hour", 3.6},
          {"spot_per_hour", 1.1}, {"source", "https://example.com/prices"},
          {"date", "2026-11-20"}};
}

std::string table_with(const std::vector<json>& rows) {
  return json{{"format", "shoplens-prices"}, {"currency", "USD"}, {"offers", rows}}.dump();
}

// The ConfigError message for a table of `rows`, or "" when it parses.
std::string error_for(const std::vector<json>& rows) {
  try {
    parse_price_table(table_with(rows), "prices.json");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(PriceTable, ReadsRowsWithTheirSourceDateAndBothPrices) {
  json cpu = valid_row("cpu-8");
  cpu["kind"] = "cpu";
  cpu["accelerator"] = "";
  cpu["accelerators"] = 0;
  cpu["spot_per_hour"] = nullptr;  // no spot offer: allowed, but asking for it is an error
  json eight = valid_row("gpu-8x");
  eight["accelerators"] = 8;
  eight["on_demand_per_hour"] = 29.4;
  eight["date"] = "2024-12";
  const PriceTable t = parse_price_table(table_with({valid_row(), cpu, eight}), "prices.json");
  ASSERT_EQ(t.offers.size(), 3u);
  EXPECT_EQ(t.currency, "USD");
  const PriceOffer& a = t.find("gpu-1x");
  EXPECT_DOUBLE_EQ(a.per_hour(PriceBasis::kOnDemand), 3.6);
  EXPECT_DOUBLE_EQ(a.per_hour(PriceBasis::kSpot), 1.1);
  EXPECT_EQ(a.source, "https://example.com/prices");
  EXPECT_EQ(a.date, "2026-11-20");
  EXPECT_EQ(t.find("gpu-8x").devices(), 8);
  EXPECT_EQ(t.find("cpu-8").devices(), 1);
  EXPECT_FALSE(t.find("cpu-8").spot_per_hour.has_value());
  EXPECT_THROW(t.find("cpu-8").per_hour(PriceBasis::kSpot), UsageError);
}

TEST(PriceTable, UnknownInstanceNamesTheTableAndTheNearestRow) {
  const PriceTable t = parse_price_table(table_with({valid_row("gcp-a2-highgpu-1g")}), "prices.json");
  EXPECT_THAT(
      [&] { t.find("gcp-a2-highgpu-1"); },
      ThrowsMessage<ConfigError>(AllOf(HasSubstr("prices.json"), HasSubstr("did you mean 'gcp-a2-highgpu-1g'"))));
}

TEST(PriceTable, RowWithoutSourceOrDateIsRefusedNamingFileAndRow) {
  json no_source = valid_row("gpu-b");
  no_source.erase("source");
  std::string m = error_for({valid_row("gpu-a"), no_source});
  EXPECT_NE(m.find("prices.json"), std::string::npos) << m;
  EXPECT_NE(m.find("offers[1] ('gpu-b')"), std::string::npos) << m;
  EXPECT_NE(m.find("source"), std::string::npos) << m;

  json blank_source = valid_row();
  blank_source["source"] = "   ";
  EXPECT_NE(error_for({blank_source}).find("source: expected a non-empty string"), std::string::npos);

  json no_date = valid_row();
  no_date.erase("date");
  m = error_for({no_date});
  EXPECT_NE(m.find("offers[0] ('gpu-1x')"), std::string::npos) << m;
  EXPECT_NE(m.find("missing \"date\""), std::string::npos) << m;

  for (const char* bad : {"last year", "2026-13-01", "2026-11-32", "26-11-01", "2026/11/01"}) {
    json row = valid_row();
    row["date"] = bad;
    EXPECT_NE(error_for({row}).find("is not YYYY-MM-DD"), std::string::npos) << bad;
  }
}

TEST(PriceTable, NonPositiveOrSwappedPricesAreRefused) {
  for (double price : {0.0, -1.5}) {
    json row = valid_row();
    row["on_demand_per_hour"] = price;
    const std::string m = error_for({row});
    EXPECT_NE(m.find("on_demand_per_hour"), std::string::npos) << m;
    EXPECT_NE(m.find("expected a number > 0"), std::string::npos) << m;
    row = valid_row();
    row["spot_per_hour"] = price;
    EXPECT_NE(error_for({row}).find("spot_per_hour"), std::string::npos) << price;
  }
  json swapped = valid_row();
  swapped["spot_per_hour"] = 9.0;
  EXPECT_NE(error_for({swapped}).find("swapped"), std::string::npos);
  json missing = valid_row();
  missing.erase("on_demand_per_hour");
  EXPECT_NE(error_for({missing}).find("missing \"on_demand_per_hour\""), std::string::npos);
  json text_price = valid_row();
  text_price["on_demand_per_hour"] = "3.6";
  EXPECT_NE(error_for({text_price}).find("on_demand_per_hour: expected number, got string \"3.6\""), std::string::npos);
}

TEST(PriceTable, DuplicateNamesKindsAndCountsAreChecked) {
  std::string m = error_for({valid_row("x"), valid_row("y"), valid_row("x")});
  EXPECT_NE(m.find("offers[2] ('x')"), std::string::npos) << m;
  EXPECT_NE(m.find("duplicate name 'x'"), std::string::npos) << m;

  json kind = valid_row();
  kind["kind"] = "fpga";
  EXPECT_NE(error_for({kind}).find("kind: 'fpga' is not one of cpu, gpu, tpu"), std::string::npos);
  json zero_gpus = valid_row();
  zero_gpus["accelerators"] = 0;
  EXPECT_NE(error_for({zero_gpus}).find("accelerators: a gpu offer needs at least 1"), std::string::npos);
  json typo = valid_row();
  typo["spot_per_hr"] = 1.0;
  EXPECT_NE(error_for({typo}).find("did you mean 'spot_per_hour'"), std::string::npos);
  EXPECT_NE(error_for({}).find("empty"), std::string::npos);

  try {
    parse_price_table("{\"offers\": [", "broken.json");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("broken.json: not valid JSON"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_price_table("/no/such/prices.json"), ConfigError);
}

TEST(PriceTable, ShippedTableIsValidAndCoversTheHardwareRecommendNeeds) {
  const PriceTable t = load_price_table(testing::source_dir() + "/configs/prices.json");
  bool cpu = false, tpu = false, a100_1 = false, a100_8 = false, h100_1 = false, h100_8 = false, l4 = false, t4 = false;
  for (const auto& o : t.offers) {
    EXPECT_FALSE(o.source.empty()) << o.name;
    EXPECT_TRUE(o.spot_per_hour.has_value()) << o.name;
    cpu |= o.kind == "cpu";
    tpu |= o.kind == "tpu";
    a100_1 |= o.accelerator.rfind("A100", 0) == 0 && o.accelerators == 1;
    a100_8 |= o.accelerator.rfind("A100", 0) == 0 && o.accelerators == 8;
    h100_1 |= o.accelerator.rfind("H100", 0) == 0 && o.accelerators == 1;
    h100_8 |= o.accelerator.rfind("H100", 0) == 0 && o.accelerators == 8;
    l4 |= o.accelerator.rfind("L4", 0) == 0;
    t4 |= o.accelerator.rfind("T4", 0) == 0;
  }
  EXPECT_TRUE(cpu && tpu && a100_1 && a100_8 && h100_1 && h100_8 && l4 && t4);
}

TEST(CostPerMillion, IsPriceOverImagesPerHour) {
  // $3.60/h at 1000 images/s: 3.6M images per hour -> $1 per million.
  EXPECT_DOUBLE_EQ(cost_per_million_images(3.6, 1000.0), 1.0);
  // Twice the rate halves the cost; twice the price doubles it.
  EXPECT_DOUBLE_EQ(cost_per_million_images(3.6, 2000.0), 0.5);
  EXPECT_DOUBLE_EQ(cost_per_million_images(7.2, 1000.0), 2.0);
  EXPECT_NEAR(cost_per_million_images(0.388472, 250.0), 0.388472 / 0.9, 1e-12);  // 0.9M images/h
  EXPECT_THROW(cost_per_million_images(0.0, 100.0), UsageError);
  EXPECT_THROW(cost_per_million_images(1.0, 0.0), UsageError);
  EXPECT_THROW(cost_per_million_images(1.0, -5.0), UsageError);
}

}  // namespace
}  // namespace shoplens
