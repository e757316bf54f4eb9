// `shoplens bench --against`: the alternating trials and the verb's set-up (bench_ab.h).
#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "shoplens/bench/bench_ab.h"
#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/path_overlap.h"
#include "shoplens/core/plural.h"
#include "shoplens/core/runtime.h"

namespace shoplens {
namespace {

// At least this many pairs: fewer cannot reach p < 0.05 one-sided with an interval at 95%.
constexpr int kMinAbTrials = 6;

// One scenario's trials, alternating sides; a failed trial fails the scenario, an interrupt stops all.
AbScenarioVerdict run_ab_scenario(const std::string& name, int trials, AbTrialSource& candidate,
                                  AbTrialSource* baseline, const std::vector<AbTrial>* stored,
                                  const BenchAbOptions& o) {
  std::vector<AbTrial> c, b;
  std::string error;
  try {
    if (!baseline) c = candidate.run_series(name, trials);  // a stored baseline: its trials ran in a row
    for (int i = 0; baseline && i < trials; ++i) {
      const bool candidate_first = i % 2 == 0;  // ABBA...: neither side always runs second
      if (!candidate_first) b.push_back(baseline->run(name, i));
      c.push_back(candidate.run(name, i));
      if (candidate_first) b.push_back(baseline->run(name, i));
      spdlog::info("bench --against: {} trial {}/{}: candidate {:.2f} images/s, baseline {:.2f}", name, i + 1, trials,
                   c.back().images_per_second, b.back().images_per_second);
    }
  } catch (const InterruptedError&) {
    throw;
  } catch (const std::exception& e) {
    error = error_message(e);
    spdlog::error("bench --against: {}: {}", name, error);
  }
  if (stored) b = *stored;
  AbScenarioVerdict v = judge_scenario(name, c, b, baseline != nullptr, o);
  v.error = error;
  return v;
}

void log_ab_verdicts(const BenchAbResult& r) {
  const auto level = r.fail_on == FailOn::kRegression ? spdlog::level::err : spdlog::level::warn;
  for (const auto& s : r.scenarios) {
    if (!s.error.empty() || !s.throughput()) continue;
    const auto& t = *s.throughput();
    const std::string line =
        fmt::format("{}: {:+.1f}% {} [{:+.1f}%, {:+.1f}%], p = {:.3g} ({})", s.scenario, t.change * 100, t.metric,
                    t.change_low * 100, t.change_high * 100, t.shift.p_lower, t.shift.test);
    if (s.regressed())
      spdlog::log(level, "bench --against: REGRESSION {}", line);
    else
      spdlog::info("bench --against: {} {}", s.improved() ? "faster" : "ok", line);
  }
  if (r.regressed())
    spdlog::log(level, "bench --against: {} regressed{}", count_of(r.regressed(), "scenario"),
                r.fail_on == FailOn::kNever ? " (--fail-on never: a warning only)" : "");
}

std::vector<std::string> scenario_names(const BenchConfig& c) {
  std::vector<std::string> names;
  for (const auto& s : c.scenarios) names.push_back(s.name);
  return names;
}

// The baseline config must have every scenario the candidate runs, by name.
void require_same_scenarios(const BenchConfig& candidate, const BenchConfig& baseline, const BenchAbOptions& o) {
  const auto names = scenario_names(baseline);
  const std::set<std::string> known(names.begin(), names.end());
  for (const auto& s : candidate.scenarios)
    if (!known.count(s.name))
      throw ConfigError(fmt::format("bench --against: scenario '{}' of {} is not in the baseline's config {}", s.name,
                                    o.config.string(), o.against_config.string()));
}

int trials_of(const BenchConfig& c, int requested) {
  if (requested > 0) return std::max(requested, kMinAbTrials);
  int most = 0;
  for (const auto& s : c.scenarios) most = std::max(most, s.trials);
  return std::max(most, kMinAbTrials);
}

}  // namespace

BenchAbResult run_ab_trials(const std::vector<std::string>& scenarios, int trials, AbTrialSource& candidate,
                            AbTrialSource* baseline, const std::map<std::string, std::vector<AbTrial>>& stored,
                            const BenchAbOptions& o) {
  BenchAbResult r;
  r.fail_on = o.fail_on;
  r.time_metric = o.time_metric;
  r.candidate_name = candidate.describe();
  r.baseline_name = baseline ? baseline->describe() : o.against_results.string();
  for (std::size_t i = 0; i < scenarios.size(); ++i) {
    spdlog::info("bench --against: [{}/{}] {}", i + 1, scenarios.size(), scenarios[i]);
    const auto it = stored.find(scenarios[i]);
    r.scenarios.push_back(run_ab_scenario(scenarios[i], trials, candidate, baseline,
                                          baseline || it == stored.end() ? nullptr : &it->second, o));
  }
  log_ab_verdicts(r);
  return r;
}

std::map<std::string, std::vector<AbTrial>> stored_trials(const std::filesystem::path& results) {
  std::map<std::string, std::vector<AbTrial>> out;
  for (const auto& [name, e] : load_baseline(results)) out[name] = trials_of_record(e);
  return out;
}

BenchAbResult run_bench_ab(const BenchAbOptions& o) {
  require_output_apart(
      {"--out", o.out},
      {{"--config", o.config}, {"--against-config", o.against_config}, {"--against-results", o.against_results}});
  const BenchConfig config = load_bench_config(o.config);
  parse_max_regression(o.max_regression);
  parse_max_regression(o.max_memory_regression);
  if (o.time_metric != "wall" && o.time_metric != "cpu")
    throw UsageError("--time-metric '" + o.time_metric + "': expected wall or cpu");
  if (!(o.confidence > 0.5 && o.confidence < 1)) throw UsageError("--confidence: expected a value in (0.5, 1)");
  const bool stored = !o.against_results.empty();
  if (stored && (!o.against.empty() || !o.against_config.empty()))
    throw UsageError("--against-results is a stored baseline: give it without --against and --against-config");
  std::map<std::string, std::vector<AbTrial>> stored_runs;
  if (stored) stored_runs = stored_trials(o.against_results);
  BenchAbOptions resolved = o;
  if (resolved.against_config.empty()) resolved.against_config = o.config;
  if (!stored) require_same_scenarios(config, load_bench_config(resolved.against_config), resolved);
  const auto program = resolved.against.empty() ? o.program : resolved.against;
  if (!stored && !std::filesystem::is_regular_file(program))
    throw UsageError("--against " + program.string() + ": no such program");
  std::filesystem::create_directories(o.out);
  auto candidate = make_process_trial_source(o.program, o.config, o.out / "trials", "candidate");
  auto baseline =
      stored ? nullptr : make_process_trial_source(program, resolved.against_config, o.out / "trials", "baseline");
  BenchAbResult r =
      run_ab_trials(scenario_names(config), trials_of(config, o.trials), *candidate, baseline.get(), stored_runs, o);
  std::string lines;
  for (const auto& s : r.scenarios) lines += ab_scenario_json(s).dump() + "\n";
  write_file_atomic(o.out / "ab.jsonl", lines);
  r.markdown = o.out / "ab.md";
  write_file_atomic(r.markdown, ab_markdown(r));
  write_file_atomic(o.out / "junit.xml", ab_junit(r, config.name));
  return r;
}

}  // namespace shoplens
