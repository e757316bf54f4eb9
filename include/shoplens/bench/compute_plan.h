// `shoplens recommend`: which hardware to train on, how long a full run takes and what it costs
// (docs/COMPUTE.md). Inputs: training throughput records (JSON lines from benchmarks, or
// published reference figures marked as estimates), the price table, and a data-parallel
// scaling model. Plain C++ (no torch): every figure here is arithmetic that tests can check.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "shoplens/core/price_table.h"

namespace shoplens {

// One line of a bench results file (docs/COMPUTE.md, "Bench records").
struct ThroughputRecord {
  std::string scenario;          // e.g. baseline_cnn, resnet50_finetune, vit
  std::string model;             // e.g. small_cnn, resnet50, vit_base
  std::string device;            // cpu | gpu | tpu
  std::string hardware;          // the price table's accelerator name (A100-40GB, ...) or a CPU label
  int devices = 1;               // devices the measurement used together
  int vcpus = 0;                 // cpu: cores used (required for cpu records)
  double images_per_second = 0;  // training throughput of all those devices together
  std::string precision;
  std::string source;  // what produced it: a command, or a publication
  std::string date;
  bool estimate = false;  // not measured by shoplens on this hardware (published figure)
  std::string origin;     // file:line, for messages and the report
};

// DataError naming `origin` and the line for malformed JSON, missing fields, a non-positive
// throughput or count, an unknown device. Blank lines and lines starting with '#' are skipped.
std::vector<ThroughputRecord> parse_bench_records(std::string_view text, const std::string& origin);
std::vector<ThroughputRecord> load_bench_records(const std::filesystem::path& path);

// Data-parallel efficiency by device count: throughput(N) = N x per-device x efficiency(N).
// Between the listed counts the efficiency is interpolated on log2(N); beyond the last it stays.
class ScalingModel {
 public:
  // 1: 1.00, 2: 0.95, 4: 0.90, 8: 0.84 (DeepLearningExamples ResNet-50 AMP, 8x A100: 6.72x),
  // 16: 0.80, 32: 0.75 (docs/COMPUTE.md).
  static ScalingModel defaults();
  // "2:0.95,8:0.84": replaces the listed points. UsageError on a malformed spec or an
  // efficiency outside (0, 1].
  static ScalingModel parse(std::string_view spec);
  double efficiency(int devices) const;
  const std::map<int, double>& points() const { return points_; }

 private:
  std::map<int, double> points_;
};

// Rough training speed of accelerators relative to an A100 (mixed precision, ResNet-50 class):
// used only where no record exists for that hardware, and then marked as an estimate.
double relative_speed(const std::string& hardware);

struct PlanRequest {
  std::string scenario;
  double dataset_size = 0;  // images per epoch
  double epochs = 0;
  double deadline_hours = 0;  // 0: none
  double budget = 0;          // 0: none (currency of the price table)
  PriceBasis basis = PriceBasis::kOnDemand;
};

struct PlanOption {
  std::string offer;  // price table row
  std::string kind;   // cpu | gpu | tpu
  std::string hardware;
  int devices = 1;
  double images_per_second = 0;
  double hours = 0;
  double price_per_hour = 0;
  double cost = 0;
  bool estimate = false;  // no measurement on this hardware
  // 0: measured here, 1: a published figure for this hardware, 2: derived from other hardware
  // (relative speed) or scaled across CPU core counts.
  int confidence = 0;
  bool runnable = true;    // false for TPUs: no LibTorch backend, listed for comparison only
  std::string derivation;  // how the throughput was obtained, in words
  bool meets_deadline = true;
  bool meets_budget = true;
  bool pareto = false;  // no other option is both faster and cheaper
};

struct Plan {
  std::vector<PlanOption> options;  // sorted by cost
  int recommended = -1;             // index into options, -1: nothing meets the constraints
  int fallback = -1;
  std::vector<std::string> reasoning;
};

// Projects every priced offer that has (or can be estimated from) a throughput for the scenario.
// DataError when no record exists for the scenario at all.
Plan plan_compute(const std::vector<ThroughputRecord>& records, const PriceTable& prices, const ScalingModel& scaling,
                  const PlanRequest& request);

// "8h", "90m", "1.5h", "3600s", "2d", or a number of hours. UsageError otherwise.
double parse_hours(std::string_view text);

}  // namespace shoplens
