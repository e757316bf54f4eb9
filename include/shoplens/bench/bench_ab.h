// `shoplens bench --against`: the same-machine A/B comparison (docs/BENCH.md, "A/B on one
// machine"). Each scenario's trials alternate between the candidate (this build, --config) and the
// baseline (another shoplens binary and/or another config, or a stored results.jsonl), so drift
// on a shared runner hits both sides; the verdict is a rank test on the paired trials with the
// effect and its confidence interval, for throughput and for peak memory. Plain C++: the trials
// come from an AbTrialSource, a child process in the program and a fake in the tests.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shoplens/bench/bench_recorder.h"
#include "shoplens/bench/bench_results.h"
#include "shoplens/bench/bench_stats.h"

namespace shoplens {

// One trial of one scenario on one side. -1: not measured.
struct AbTrial {
  double images_per_second = 0;         // images over the measured window (wall clock)
  double cpu_images_per_second = -1;    // images per CPU-second (user + system) of the measured window
  std::int64_t peak_rss_bytes = -1;     // the process's resident high-water mark
  std::int64_t peak_device_bytes = -1;  // tensors' peak (CUDA caching allocator, CPU tracking allocator)
  bool throttled = false;               // the GPU throttled during the trial (NVML's throttle reasons)
};

// Where one side's trials come from.
class AbTrialSource {
 public:
  virtual ~AbTrialSource() = default;
  // Trial `index` (0-based) of the named scenario. Throws on failure (the scenario is then failed).
  virtual AbTrial run(const std::string& scenario, int index) = 0;
  // `trials` trials in a row, as one recorder run takes them (against a stored run, which did so);
  // by default run() `trials` times.
  virtual std::vector<AbTrial> run_series(const std::string& scenario, int trials);
  virtual std::string describe() const = 0;
};

// The trials of one recorder record (a results.jsonl line): its per-trial rates and CPU rates,
// its scenario-wide peaks and throttling on every trial.
std::vector<AbTrial> trials_of_record(const BaselineEntry& record);

// A shoplens binary run once per trial: `PROGRAM bench --config CONFIG --scenario NAME --trials 1
// --out WORK/...`, its results.jsonl read back. The binary must have `bench --scenario`.
std::unique_ptr<AbTrialSource> make_process_trial_source(const std::filesystem::path& program,
                                                         const std::filesystem::path& config,
                                                         const std::filesystem::path& work, const std::string& side);

// What `bench --against` was asked. The candidate is always this program with `config`.
struct BenchAbOptions {
  std::filesystem::path config;           // the candidate's bench config
  std::filesystem::path out;              // ab.jsonl, ab.md, junit.xml, trials/ (each trial's child output)
  std::filesystem::path against;          // the baseline's shoplens binary (empty: this program)
  std::filesystem::path against_config;   // the baseline's bench config (empty: config)
  std::filesystem::path against_results;  // a stored results.jsonl as the baseline (unpaired; no runs)
  int trials = 0;                         // trials per side and scenario (0: the config's, at least 6)
  std::string time_metric = "wall";       // the throughput the verdict gates: wall (images/s) | cpu (images per CPU-s)
  std::string max_regression = "5%";      // slowdown (median shift) that fails, parse_max_regression's forms
  std::string max_memory_regression = "5%";  // peak-memory growth that fails
  double confidence = 0.95;                  // of the interval; the test's one-sided alpha is (1 - confidence)
  FailOn fail_on = FailOn::kRegression;
  std::filesystem::path program;  // this program (running_program()), the candidate's binary
};

// The verdict on one metric of one scenario.
struct AbMetricVerdict {
  std::string metric;  // images_per_second | images_per_cpu_second | peak_rss_bytes | peak_device_bytes
  bool higher_is_better = true;
  bool gated = true;  // false: reported only (the throughput --time-metric does not name): its verdict does not count
  std::vector<double> candidate, baseline;  // per trial; paired by index when `paired`
  bool paired = true;
  bool compared = false;                               // false: not measured on both sides
  ShiftEstimate shift;                                 // of log(candidate) - log(baseline)
  double change = 0, change_low = 0, change_high = 0;  // relative: exp(shift) - 1, and its interval
  bool significant = false;                            // the one-sided test in the bad direction, p < 1 - confidence
  bool regressed = false;                              // significant and the change is beyond the limit
  bool improved = false;                               // significant in the good direction and beyond the limit
};

struct AbScenarioVerdict {
  std::string scenario;
  std::string error;  // non-empty: a trial failed
  std::vector<AbMetricVerdict> metrics;
  // The median-and-spread gate of `--baseline` (gate_one) on the same trials, for comparison: on
  // images/s (the gate as `--baseline` runs it) and on images per CPU-second.
  GateVerdict median_gate, median_gate_cpu;
  std::vector<int> throttled_candidate, throttled_baseline;  // trials (0-based) in which the GPU throttled
  bool regressed() const;
  bool improved() const;
  // The throughput metric the verdict gates (--time-metric); null when none was measured.
  const AbMetricVerdict* throughput() const;
};

// The statistics of one metric: the shift of log(candidate / baseline), paired or two-sample.
AbMetricVerdict judge_metric(const std::string& metric, bool higher_is_better, const std::vector<double>& candidate,
                             const std::vector<double>& baseline, bool paired, double limit, double confidence);

// Every metric of one scenario from its trials (memory only where measured on both sides).
AbScenarioVerdict judge_scenario(const std::string& scenario, const std::vector<AbTrial>& candidate,
                                 const std::vector<AbTrial>& baseline, bool paired, const BenchAbOptions& options);

struct BenchAbResult {
  std::vector<AbScenarioVerdict> scenarios;
  FailOn fail_on = FailOn::kRegression;
  std::string baseline_name, candidate_name;
  std::string time_metric = "wall";
  std::filesystem::path markdown;  // ab.md
  int failed() const;
  int regressed() const;
  bool failed_the_gate() const { return failed() > 0 || (fail_on == FailOn::kRegression && regressed() > 0); }
};

// Runs the scenarios' trials alternating (pair i: candidate first when i is even, baseline first
// when odd, so neither side always runs warm), then judges them. `baseline` may be null when the
// baseline is stored (`stored`: its trials per scenario name).
BenchAbResult run_ab_trials(const std::vector<std::string>& scenarios, int trials, AbTrialSource& candidate,
                            AbTrialSource* baseline, const std::map<std::string, std::vector<AbTrial>>& stored,
                            const BenchAbOptions& options);

// The whole verb: checks, trial sources, run_ab_trials, outputs written.
BenchAbResult run_bench_ab(const BenchAbOptions& options);

// Outputs: one JSON line per scenario, a Markdown summary for a CI job summary or PR comment
// (changed scenarios first, arrows, intervals), JUnit XML (a regression is a failure).
nlohmann::json ab_scenario_json(const AbScenarioVerdict& v);
std::string ab_markdown(const BenchAbResult& result);
std::string ab_junit(const BenchAbResult& result, const std::string& suite_name);

// A stored results.jsonl's trials per scenario (its trial_images_per_second; peak_rss_bytes and
// peak_allocated_bytes as every trial's, since a run records them per scenario).
std::map<std::string, std::vector<AbTrial>> stored_trials(const std::filesystem::path& results);

}  // namespace shoplens
