#include "shoplens/bench/bench_recorder.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "shoplens/bench/bench_history.h"
#include "shoplens/bench/bench_runner.h"
#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/path_overlap.h"
#include "shoplens/core/plural.h"

namespace shoplens {
namespace {

std::string source_of(const BenchRecorderOptions& o) {
  if (!o.source.empty()) return o.source;
  return fmt::format("shoplens bench --config {}{}", o.config.filename().string(),
                     o.trials > 0 ? fmt::format(" --trials {}", o.trials) : "");
}

void log_verdicts(const BenchRecorderResult& record, double max_regression) {
  const auto level = record.fail_on == FailOn::kRegression ? spdlog::level::err : spdlog::level::warn;
  for (const auto& g : record.gate) {
    if (g.regressed)
      spdlog::log(level, "bench: REGRESSION {}", g.message);
    else if (g.compared)
      spdlog::info("bench: ok {}", g.message);
    else
      spdlog::warn("bench: {}", g.message);
  }
  if (record.failed()) spdlog::error("bench: {} failed", count_of(record.failed(), "scenario"));
  if (record.regressed())
    spdlog::log(level, "bench: {} regressed beyond {:.1f}% and their noise{}", count_of(record.regressed(), "scenario"),
                max_regression * 100, record.fail_on == FailOn::kNever ? " (--fail-on never: a warning only)" : "");
}

// `--scenario NAME`: the one scenario of the config, or a ConfigError listing the names it has.
void keep_only(BenchConfig& config, const std::string& name, const std::filesystem::path& origin) {
  std::vector<BenchScenario> kept;
  std::string names;
  for (const auto& s : config.scenarios) {
    if (s.name == name) kept.push_back(s);
    names += (names.empty() ? "" : ", ") + s.name;
  }
  if (kept.empty())
    throw ConfigError(fmt::format("--scenario {}: {} has no such scenario (it has: {})", name, origin.string(), names));
  config.scenarios = std::move(kept);
}

}  // namespace

int BenchRecorderResult::failed() const {
  return static_cast<int>(
      std::count_if(results.begin(), results.end(), [](const auto& r) { return !r.error.empty(); }));
}

int BenchRecorderResult::regressed() const {
  return static_cast<int>(std::count_if(gate.begin(), gate.end(), [](const auto& g) { return g.regressed; }));
}

BenchRecorderResult run_bench_recorder(const BenchRecorderOptions& o) {
  require_output_apart({"--out", o.out}, {{"--config", o.config}, {"--baseline", o.baseline}});
  if (!o.history.empty()) load_history_or_none(o.history);  // a broken history fails before the first scenario
  BenchConfig config = load_bench_config(o.config);
  if (!o.scenario.empty()) keep_only(config, o.scenario, o.config);
  for (const auto& s : config.scenarios)
    require_output_apart({"--out", o.out}, {{"the shards of scenario '" + s.name + "'", s.shards}});
  const double max_regression = parse_max_regression(o.max_regression);
  std::map<std::string, BaselineEntry> baseline;
  if (!o.baseline.empty()) baseline = load_baseline(o.baseline);
  if (o.trials > 0)
    for (auto& s : config.scenarios) s.trials = o.trials;
  std::filesystem::create_directories(o.out);
  const std::string source = source_of(o);

  const Nvml nvml;
  BenchRecorderResult record;
  record.fail_on = o.fail_on;
  record.env = bench_environment(nvml);
  record.markdown = o.out / "results.md";
  spdlog::info("bench: {} from {}; GPU telemetry: {}",
               count_of(static_cast<std::int64_t>(config.scenarios.size()), "scenario"), o.config.string(),
               nvml.available() ? "NVML " + record.env.driver : nvml.why());
  auto write_outputs = [&] {
    if (!o.baseline.empty()) record.gate = gate_results(record.results, baseline, max_regression);
    write_file_atomic(o.out / "results.jsonl", results_jsonl(record.results, record.env, source));
    write_file_atomic(o.out / "results.csv", results_csv(record.results, record.env));
    write_file_atomic(record.markdown, results_markdown(record.results, record.env, record.gate));
    write_file_atomic(o.out / "junit.xml", results_junit(record.results, record.gate, config.name));
  };
  for (std::size_t i = 0; i < config.scenarios.size(); ++i) {
    const auto& s = config.scenarios[i];
    spdlog::info("bench: [{}/{}] {}", i + 1, config.scenarios.size(), s.name);
    try {
      record.results.push_back(run_scenario(s, nvml));
    } catch (const InterruptedError&) {
      // The scenarios that finished are still worth having; the interrupted one is left out.
      write_outputs();
      spdlog::warn("bench: interrupted; {} written to {}",
                   count_of(static_cast<std::int64_t>(record.results.size()), "finished scenario"), o.out.string());
      throw;
    }
    const auto sum = summarise(record.results.back());
    if (record.results.back().error.empty())
      spdlog::info("bench: {}: {:.1f} images/s (noise {:.1f}%), step p50 {:.1f} ms", s.name, sum.images_per_second,
                   sum.noise * 100, sum.step_p50 * 1e3);
  }
  write_outputs();
  if (!o.history.empty())
    spdlog::info("bench: run appended to {}",
                 append_history(o.history, history_run(record.results, record.env, utc_timestamp())).string());
  log_verdicts(record, max_regression);
  return record;
}

}  // namespace shoplens
