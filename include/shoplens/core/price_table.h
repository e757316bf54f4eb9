// The hardware price table (configs/prices.json, format in docs/COMPUTE.md): one row per offer
// (a CPU VM, 1x/8x A100, H100, L4, T4, a TPU slice, ...) with its on-demand and spot price per
// hour, and where each figure came from (source and date). Plain C++: `score` turns a measured
// throughput into a cost per million images with it, `recommend` prices whole training runs.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shoplens {

enum class PriceBasis { kOnDemand, kSpot };

// "on-demand" | "spot"; UsageError otherwise.
PriceBasis parse_price_basis(std::string_view text);
std::string to_string(PriceBasis basis);

struct PriceOffer {
  std::string name;         // unique key, e.g. "gcp-a2-highgpu-1g"
  std::string provider;     // e.g. "GCP", "AWS"
  std::string kind;         // cpu | gpu | tpu
  std::string accelerator;  // e.g. "A100-40GB" ("" for a CPU VM)
  int accelerators = 0;     // devices per instance (0 for a CPU VM)
  int vcpus = 0;
  std::string region;
  double on_demand_per_hour = 0;
  std::optional<double> spot_per_hour;  // absent where the provider sells no spot capacity
  std::string source;                   // URL or document the prices were read from
  std::string date;                     // when they were read: YYYY-MM-DD or YYYY-MM
  std::string note;

  // The instance's price per hour on `basis`; UsageError when it has no spot price.
  double per_hour(PriceBasis basis) const;
  // Devices a job can use one at a time: accelerators, or 1 for a CPU VM.
  int devices() const { return accelerators > 0 ? accelerators : 1; }
};

struct PriceTable {
  std::string origin;    // the file (or label) it was read from, for messages
  std::string currency;  // e.g. "USD"
  std::vector<PriceOffer> offers;

  // ConfigError naming the table and the nearest name when `name` is not a row.
  const PriceOffer& find(std::string_view name) const;
};

// Parses and validates a table. ConfigError naming `origin` and the row (index and name) for
// malformed JSON, a missing field, a row without source or date, a non-positive price or count,
// an unknown kind, a spot price above on-demand, or a duplicate name.
PriceTable parse_price_table(std::string_view json_text, const std::string& origin);
// Reads `path` (IoError when it cannot be read) and parses it.
PriceTable load_price_table(const std::filesystem::path& path);

// Cost of scoring (or training on) a million images at `images_per_second` on a device that
// costs `price_per_hour`. UsageError for a non-positive rate or price.
double cost_per_million_images(double price_per_hour, double images_per_second);

}  // namespace shoplens
