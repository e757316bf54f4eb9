// `shoplens bench`: the plain-C++ half of the benchmark recorder (docs/BENCH.md). The bench
// config and its scenario matrix, the per-scenario result, its summary statistics, the writers
// (JSON lines, CSV, Markdown, JUnit XML) and the regression gate against a baseline. No torch:
// everything here is tested on fake results; the runner is bench_runner_torch.cpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "shoplens/bench/synthetic_workload.h"

namespace shoplens {

// One cell of the matrix: what to run (the workload) and how to run and measure it.
// Where a scenario's batches come from: one fixed synthetic batch (the device alone), or prepared
// shards through the training loader.
enum class BenchData { kSynthetic, kShards };
inline constexpr EnumName<BenchData> kBenchDataNames[] = {{BenchData::kSynthetic, "synthetic"},
                                                          {BenchData::kShards, "shards"}};

struct BenchScenario : SyntheticWorkload {
  std::string name;                          // unique; generated from the cell unless given
  int batch = 32;                            // 0 with batch_auto
  bool batch_auto = false;                   // "auto": find_batch() under memory_budget
  DeviceChoice device = DeviceChoice::kCpu;  // cpu | cuda (no auto: a scenario names where it runs)
  int threads = 0;                           // 0: every usable core
  BenchData data = BenchData::kSynthetic;
  std::string shards;      // folder of prepared shards (data = shards)
  int loader_workers = 0;  // 0: threads
  int warmup_steps = 3;
  int steps = 10;  // measured steps per trial
  int trials = 3;
  ByteSize memory_budget{std::uint64_t{2} << 30};  // batch "auto" only (2 GiB)
  std::string hardware;            // recommend's hardware label (e.g. A100-40GB); empty: the device name
  std::string recommend_scenario;  // recommend's --scenario name (e.g. baseline_cnn); empty: name
  std::uint64_t seed = 1234;
};

struct BenchConfig {
  std::string name = "bench";
  std::vector<BenchScenario> scenarios;
};

// Parses a bench config (docs/BENCH.md): "defaults" for every scenario, a "matrix" whose list
// values are crossed, and/or explicit "scenarios". ConfigError naming `origin` and the JSON path
// for unknown keys (with the nearest known one), bad types or values, duplicate names, no scenario.
BenchConfig parse_bench_config(const nlohmann::json& doc, const std::string& origin);
BenchConfig load_bench_config(const std::filesystem::path& path);

// The environment a result was measured in.
struct BenchEnvironment {
  std::string commit, torch_version, device_name, driver = "unavailable", cpu_model, date, hostname;
  int usable_cores = 0;
  bool cuda_compiled = false;
  // /proc/loadavg's 1/5/15-minute figures when the run started: on a shared runner, what else ran.
  std::string load_average;
};

// The environment every benchmark record carries, without the GPU fields (bench_environment in
// bench_runner.h adds them from NVML): commit, LibTorch, CPU and usable cores, date, host, load.
BenchEnvironment host_environment();

// One GPU sample from NVML. -1: not reported by this driver.
struct GpuSample {
  double t = 0;            // seconds since the measured window started
  double utilisation = 0;  // percent
  double memory_used_bytes = 0;
  double sm_clock_mhz = -1, memory_clock_mhz = -1;
  double power_watts = -1, temperature_c = -1;
  std::uint64_t throttle_reasons = 0;  // nvmlDeviceGetCurrentClocksThrottleReasons' bit mask
};

// What NVML saw during one trial: the lowest clocks, mean power, highest temperature and every
// throttle reason of its samples. `samples` 0: no telemetry for the trial.
struct TrialGpu {
  int samples = 0;
  double sm_clock_mhz_min = -1, memory_clock_mhz_min = -1, power_watts_mean = -1, temperature_c_max = -1;
  std::uint64_t throttle_reasons = 0;
  // A reason that slows the clocks under load (power cap, thermal, hardware slowdown, power brake,
  // sync boost, display clocks): not GPU idle nor the application clock setting.
  bool throttled() const;
};
// The samples with t in [begin, end) summarised.
TrialGpu summarise_trial_gpu(const std::vector<GpuSample>& samples, double begin, double end);
// "sw_power_cap,hw_thermal_slowdown" for a mask; "" for none.
std::string throttle_reason_names(std::uint64_t mask);

// What one scenario measured. Times in seconds, memory in bytes.
struct ScenarioResult {
  BenchScenario scenario;
  int batch = 0;    // the batch run (after "auto")
  int threads = 0;  // resolved
  std::vector<double> trial_images_per_second;
  bool text = false;                            // a text model: the token figures below are set
  std::vector<double> trial_tokens_per_second;  // real (unpadded) tokens per second, per trial
  double padding_fraction = -1;                 // shards: padded slots that held no token (LoaderStats); synthetic 0
  std::vector<double> step_seconds;             // every measured step of every trial
  std::vector<double> trial_data_wait_seconds;  // per trial, blocked waiting for the loader
  std::vector<double> trial_seconds;            // measured window per trial
  double cpu_seconds = 0;                       // user + system over the measured windows
  std::vector<double> trial_cpu_seconds;        // user + system per trial's measured window
  std::int64_t peak_rss_bytes = 0;              // resident set high-water mark of the scenario
  bool peak_rss_scoped = false;                 // false: the process's lifetime peak (clear_refs refused)
  std::int64_t peak_allocated_bytes = -1;       // tensors (CPU tracking allocator / CUDA): -1 unknown
  std::int64_t peak_reserved_bytes = -1;        // CUDA caching allocator; CPU: = allocated
  std::string gpu_status = "unavailable";       // "ok" or why not (no NVML, CPU scenario)
  std::vector<GpuSample> gpu_samples;
  std::vector<TrialGpu> trial_gpu;  // per trial (CUDA with NVML), same order as the trial rates
  int throttled_trials() const;
  std::string error;  // non-empty: the scenario failed (message)
};

// Derived figures of a result, the ones the writers and the gate use.
struct ScenarioSummary {
  double images_per_second = 0;  // median over trials
  double tokens_per_second = 0;  // text: median over trials
  double noise = 0;              // (max - min) / median of the trial rates
  double step_p50 = 0, step_p95 = 0, step_p99 = 0;
  double data_wait_fraction = 0;  // waiting for data / measured time, over all trials
  double data_wait_seconds = 0;   // median per trial
  double cpu_utilisation = 0;     // cores busy on average over the measured windows
  double gpu_util_mean = -1, gpu_util_max = -1, gpu_memory_max_bytes = -1;  // -1 unavailable
};
ScenarioSummary summarise(const ScenarioResult& r);

// Relative spread of a sample: (max - min) / median; 0 for fewer than two values.
double relative_range(const std::vector<double>& values);

// One JSON line per scenario: a `shoplens recommend --bench` record (scenario, device cpu|gpu,
// hardware, vcpus, images_per_second, source, date, ...) plus the recorder's fields.
nlohmann::json result_to_json(const ScenarioResult& r, const BenchEnvironment& env, const std::string& source);
std::string results_jsonl(const std::vector<ScenarioResult>& results, const BenchEnvironment& env,
                          const std::string& source);
std::string results_csv(const std::vector<ScenarioResult>& results, const BenchEnvironment& env);
// `gate` may be empty (no baseline); otherwise one verdict per result, same order.
struct GateVerdict;
std::string results_markdown(const std::vector<ScenarioResult>& results, const BenchEnvironment& env,
                             const std::vector<GateVerdict>& gate);
std::string results_junit(const std::vector<ScenarioResult>& results, const std::vector<GateVerdict>& gate,
                          const std::string& suite_name);

// The fields recommend accepts besides its own (compute_plan.cpp), so recorder lines parse there.
const std::vector<std::string>& recorder_record_keys();

// A baseline scenario as read back from a results.jsonl.
struct BaselineEntry {
  double images_per_second = 0;
  std::vector<double> trial_images_per_second;
  std::string origin;                               // file:line
  std::int64_t peak_rss_bytes = -1;                 // -1: not recorded
  std::int64_t peak_allocated_bytes = -1;           // -1: not recorded
  double cpu_utilisation = -1;                      // cores busy over the measured windows; -1: not recorded
  int throttled_trials = 0;                         // trials in which the GPU throttled (NVML)
  std::vector<double> trial_images_per_cpu_second;  // per trial; empty: not recorded
};
// ConfigError (exit 2: the gate cannot judge) naming file:line for malformed JSON or a line
// without a name/scenario or a positive images_per_second.
std::map<std::string, BaselineEntry> parse_baseline(std::string_view text, const std::string& origin);
// ConfigError when missing or without any result.
std::map<std::string, BaselineEntry> load_baseline(const std::filesystem::path& path);

// "5%", "5" (percent) or "0.05" (a fraction below 1 without a % sign is read as a fraction).
// UsageError otherwise. Returns a fraction.
double parse_max_regression(const std::string& text);

struct GateVerdict {
  std::string scenario;
  bool compared = false;  // false: no baseline entry (new scenario) or the scenario failed
  bool regressed = false;
  double baseline = 0, current = 0;
  double change = 0;  // (current - baseline) / baseline: negative is slower
  double noise = 0;   // the larger relative trial range of the two sides
  std::string message;
};
// A scenario regressed when its median throughput fell by more than `max_regression` AND by more
// than its measured trial-to-trial noise (either side's). Faster is never a regression.
GateVerdict gate_one(const std::string& scenario, double current, const std::vector<double>& current_trials,
                     const BaselineEntry& baseline, double max_regression);
std::vector<GateVerdict> gate_results(const std::vector<ScenarioResult>& results,
                                      const std::map<std::string, BaselineEntry>& baseline, double max_regression);

}  // namespace shoplens
