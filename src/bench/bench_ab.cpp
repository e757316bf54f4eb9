#include "shoplens/bench/bench_ab.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/path_overlap.h"
#include "shoplens/core/plural.h"
#include "shoplens/core/stats.h"
#include "shoplens/core/subprocess.h"

namespace shoplens {
namespace {

using json = nlohmann::json;

// A file name for a scenario's trial folders: its name with anything but [A-Za-z0-9._-] replaced.
std::string file_safe(const std::string& name) {
  std::string out;
  for (char c : name) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-') ? c : '_';
  return out;
}

class ProcessTrialSource : public AbTrialSource {
 public:
  ProcessTrialSource(std::filesystem::path program, std::filesystem::path config, std::filesystem::path work,
                     std::string side)
      : program_(std::move(program)), config_(std::move(config)), work_(std::move(work)), side_(std::move(side)) {}

  AbTrial run(const std::string& scenario, int index) override {
    return child(scenario, fmt::format("{}-{}", file_safe(scenario), index), 1).front();
  }

  // A stored baseline's trials ran in one process: the candidate's run the same way.
  std::vector<AbTrial> run_series(const std::string& scenario, int trials) override {
    return child(scenario, file_safe(scenario), trials);
  }

  std::string describe() const override { return program_.string() + " --config " + config_.string(); }

 private:
  // One child `bench --scenario NAME --trials N` in work/side/folder, its trials read back.
  std::vector<AbTrial> child(const std::string& scenario, const std::string& folder, int trials) {
    const auto dir = work_ / side_ / folder;
    const auto log = dir.string() + ".log";
    std::filesystem::create_directories(dir.parent_path());
    const ProcessExit exit =
        run_process({program_.string(), "bench", "--config", config_.string(), "--scenario", scenario, "--trials",
                     std::to_string(trials), "--out", dir.string(), "--fail-on", "never"},
                    log);
    if (exit.interrupted()) throw InterruptedError();
    const auto results = dir / "results.jsonl";
    std::map<std::string, BaselineEntry> got;
    if (std::filesystem::exists(results)) got = parse_baseline(read_file(results), results.string());
    const auto it = got.find(scenario);
    if (!exit.ok() || it == got.end())
      throw DataError(fmt::format("{} run {} of '{}' ({}) failed: {}; its log: {}", side_, folder, scenario,
                                  program_.string(), exit.describe(), log));
    return trials_of_record(it->second);
  }

  std::filesystem::path program_, config_, work_;
  std::string side_;
};

// The values of one AbTrial field, or empty when any trial lacks it (not comparable).
template <class F>
std::vector<double> field_of(const std::vector<AbTrial>& trials, F get) {
  std::vector<double> out;
  for (const auto& t : trials) {
    const double v = get(t);
    if (!(v > 0)) return {};
    out.push_back(v);
  }
  return out;
}

// The median-and-spread gate of `--baseline` on one metric's trials of both sides.
GateVerdict median_gate_of(const std::string& scenario, const std::vector<double>& candidate,
                           const std::vector<double>& baseline, double limit) {
  BaselineEntry entry;
  entry.images_per_second = percentile(baseline, 0.5);
  entry.trial_images_per_second = baseline;
  return gate_one(scenario, percentile(candidate, 0.5), candidate, entry, limit);
}

void set_relative(AbMetricVerdict& v) {
  v.change = std::exp(v.shift.estimate) - 1;
  v.change_low = std::exp(v.shift.low) - 1;
  v.change_high = std::exp(v.shift.high) - 1;
}

}  // namespace

std::vector<AbTrial> AbTrialSource::run_series(const std::string& scenario, int trials) {
  std::vector<AbTrial> out;
  out.reserve(static_cast<std::size_t>(std::max(trials, 0)));
  for (int i = 0; i < trials; ++i) out.push_back(run(scenario, i));
  return out;
}

std::vector<AbTrial> trials_of_record(const BaselineEntry& e) {
  const std::vector<double> rates =
      e.trial_images_per_second.empty() ? std::vector<double>{e.images_per_second} : e.trial_images_per_second;
  const bool per_trial_cpu = e.trial_images_per_cpu_second.size() == rates.size();
  std::vector<AbTrial> trials;
  trials.reserve(rates.size());
  for (std::size_t i = 0; i < rates.size(); ++i) {
    AbTrial t;
    t.images_per_second = rates[i];
    t.peak_rss_bytes = e.peak_rss_bytes;  // a record has one peak per scenario
    t.peak_device_bytes = e.peak_allocated_bytes;
    t.throttled = e.throttled_trials > 0;
    if (per_trial_cpu)
      t.cpu_images_per_second = e.trial_images_per_cpu_second[i];
    else if (rates.size() == 1 && e.cpu_utilisation > 0)
      t.cpu_images_per_second = rates[i] / e.cpu_utilisation;
    trials.push_back(t);
  }
  return trials;
}

std::unique_ptr<AbTrialSource> make_process_trial_source(const std::filesystem::path& program,
                                                         const std::filesystem::path& config,
                                                         const std::filesystem::path& work, const std::string& side) {
  return std::make_unique<ProcessTrialSource>(program, config, work, side);
}

AbMetricVerdict judge_metric(const std::string& metric, bool higher_is_better, const std::vector<double>& candidate,
                             const std::vector<double>& baseline, bool paired, double limit, double confidence) {
  AbMetricVerdict v;
  v.metric = metric;
  v.higher_is_better = higher_is_better;
  v.candidate = candidate;
  v.baseline = baseline;
  v.paired = paired;
  v.compared = !candidate.empty() && !baseline.empty() && (!paired || candidate.size() == baseline.size());
  if (!v.compared) return v;
  std::vector<double> lc, lb, d;
  for (double x : candidate) lc.push_back(std::log(x));
  for (double x : baseline) lb.push_back(std::log(x));
  if (paired) {
    for (std::size_t i = 0; i < lc.size(); ++i) d.push_back(lc[i] - lb[i]);
    v.shift = paired_shift(d, confidence);
  } else {
    v.shift = two_sample_shift(lc, lb, confidence);
  }
  set_relative(v);
  const double alpha = 1 - confidence;
  const double bad_p = higher_is_better ? v.shift.p_lower : v.shift.p_higher;
  const double good_p = higher_is_better ? v.shift.p_higher : v.shift.p_lower;
  const double worse = higher_is_better ? -v.change : v.change;
  v.significant = bad_p < alpha;
  v.regressed = v.significant && worse > limit;
  v.improved = good_p < alpha && -worse > limit;
  return v;
}

AbScenarioVerdict judge_scenario(const std::string& scenario, const std::vector<AbTrial>& candidate,
                                 const std::vector<AbTrial>& baseline, bool paired, const BenchAbOptions& o) {
  AbScenarioVerdict v;
  v.scenario = scenario;
  const double time_limit = parse_max_regression(o.max_regression);
  const double memory_limit = parse_max_regression(o.max_memory_regression);
  using Get = double (*)(const AbTrial&);
  const Get rate = [](const AbTrial& t) { return t.images_per_second; };
  const Get cpu_rate = [](const AbTrial& t) { return t.cpu_images_per_second; };
  const Get rss = [](const AbTrial& t) { return static_cast<double>(t.peak_rss_bytes); };
  const Get device = [](const AbTrial& t) { return static_cast<double>(t.peak_device_bytes); };
  const auto cr = field_of(candidate, rate), br = field_of(baseline, rate);
  v.metrics.push_back(judge_metric("images_per_second", true, cr, br, paired, time_limit, o.confidence));
  v.median_gate = median_gate_of(scenario, cr, br, time_limit);
  const auto cc = field_of(candidate, cpu_rate), bc = field_of(baseline, cpu_rate);
  if (!cc.empty() && !bc.empty()) {
    v.metrics.push_back(judge_metric("images_per_cpu_second", true, cc, bc, paired, time_limit, o.confidence));
    v.median_gate_cpu = median_gate_of(scenario, cc, bc, time_limit);
  }
  // A stored run from before trial_images_per_cpu_second has no CPU time: images/s then.
  const bool cpu = o.time_metric == "cpu" && !cc.empty() && !bc.empty();
  for (auto& m : v.metrics) m.gated = (m.metric == "images_per_cpu_second") == cpu;
  for (std::size_t i = 0; i < candidate.size(); ++i)
    if (candidate[i].throttled) v.throttled_candidate.push_back(static_cast<int>(i));
  for (std::size_t i = 0; i < baseline.size(); ++i)
    if (baseline[i].throttled) v.throttled_baseline.push_back(static_cast<int>(i));
  for (const auto& [name, get] : {std::pair<const char*, Get>{"peak_rss_bytes", rss}, {"peak_device_bytes", device}}) {
    const auto c = field_of(candidate, get), b = field_of(baseline, get);
    if (!c.empty() && !b.empty())
      v.metrics.push_back(judge_metric(name, false, c, b, paired, memory_limit, o.confidence));
  }
  return v;
}

bool AbScenarioVerdict::regressed() const {
  return std::any_of(metrics.begin(), metrics.end(), [](const auto& m) { return m.gated && m.regressed; });
}

bool AbScenarioVerdict::improved() const {
  return !regressed() &&
         std::any_of(metrics.begin(), metrics.end(), [](const auto& m) { return m.gated && m.improved; });
}

const AbMetricVerdict* AbScenarioVerdict::throughput() const {
  for (const auto& m : metrics)
    if (m.gated && m.higher_is_better) return &m;
  return nullptr;
}

int BenchAbResult::failed() const {
  return static_cast<int>(
      std::count_if(scenarios.begin(), scenarios.end(), [](const auto& s) { return !s.error.empty(); }));
}

int BenchAbResult::regressed() const {
  return static_cast<int>(
      std::count_if(scenarios.begin(), scenarios.end(), [](const auto& s) { return s.regressed(); }));
}

}  // namespace shoplens
