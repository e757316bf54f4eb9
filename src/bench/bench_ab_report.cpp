// `shoplens bench --against`'s outputs (bench_ab.h): ab.jsonl, ab.md (a CI job summary or PR
// comment) and junit.xml.
#include <cmath>
#include <sstream>

#include <fmt/format.h>

#include "shoplens/bench/bench_ab.h"
#include "shoplens/core/plural.h"
#include "shoplens/core/strings.h"

namespace shoplens {
namespace {

using json = nlohmann::json;

// JSON has no infinity: an interval too wide for the trials is null on that end.
json finite_or_null(double v) { return std::isfinite(v) ? json(v) : json(); }

json metric_json(const AbMetricVerdict& m) {
  json j;
  j["metric"] = m.metric;
  j["higher_is_better"] = m.higher_is_better;
  j["gated"] = m.gated;
  j["compared"] = m.compared;
  j["paired"] = m.paired;
  j["candidate"] = m.candidate;
  j["baseline"] = m.baseline;
  if (!m.compared) return j;
  j["test"] = m.shift.test;
  j["n"] = m.shift.n;
  j["change"] = m.change;
  j["change_low"] = finite_or_null(m.change_low);
  j["change_high"] = finite_or_null(m.change_high);
  j["confidence"] = m.shift.confidence;
  j["p_lower"] = m.shift.p_lower;
  j["p_higher"] = m.shift.p_higher;
  j["significant"] = m.significant;
  j["regressed"] = m.regressed;
  j["improved"] = m.improved;
  return j;
}

std::string percent(double v) { return std::isfinite(v) ? fmt::format("{:+.1f}%", v * 100) : "?"; }

// ▼ worse, ▲ better (significant and beyond the limit), = no change shown.
std::string arrow(const AbMetricVerdict& m) {
  if (!m.compared) return "·";
  if (m.regressed) return "🔴 ▼";
  if (m.improved) return "🟢 ▲";
  return "=";
}

std::string metric_cell(const AbMetricVerdict* m) {
  if (!m || !m->compared) return "n/a";
  return fmt::format("{} {} [{}, {}]", arrow(*m), percent(m->change), percent(m->change_low), percent(m->change_high));
}

const AbMetricVerdict* find_metric(const AbScenarioVerdict& s, const std::string& name) {
  for (const auto& m : s.metrics)
    if (m.metric == name) return &m;
  return nullptr;
}

// Changed scenarios first: regressions, then improvements, then failures, then the rest.
int order_of(const AbScenarioVerdict& s) {
  if (s.regressed()) return 0;
  if (s.improved()) return 1;
  return s.error.empty() ? 3 : 2;
}

std::string md_row(const AbScenarioVerdict& s) {
  const auto* time = s.throughput();
  const std::string p = time && time->compared ? fmt::format("{:.3g}", time->shift.p_lower) : "n/a";
  const std::string status_word = !s.error.empty() ? "failed"
                                  : s.regressed()  ? "**regressed**"
                                  : s.improved()   ? "faster"
                                                   : "ok";
  const auto throttled = s.throttled_candidate.size() + s.throttled_baseline.size();
  const std::string status =
      status_word + (throttled ? " ⚠ GPU throttled in " + count_of(static_cast<std::int64_t>(throttled), "trial") : "");
  std::string name = s.scenario;
  for (auto& c : name)
    if (c == '|') c = '/';
  return fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", name, status, metric_cell(time), p,
                     metric_cell(find_metric(s, "peak_rss_bytes")), metric_cell(find_metric(s, "peak_device_bytes")),
                     s.median_gate.compared ? (s.median_gate.regressed ? "regressed" : "ok") : "n/a");
}

json gate_json(const GateVerdict& g) {
  return {{"compared", g.compared}, {"regressed", g.regressed}, {"change", g.change}, {"noise", g.noise}};
}

}  // namespace

json ab_scenario_json(const AbScenarioVerdict& v) {
  json j;
  j["name"] = v.scenario;
  j["status"] = !v.error.empty() ? "failed" : v.regressed() ? "regressed" : v.improved() ? "improved" : "ok";
  if (!v.error.empty()) j["error"] = v.error;
  json metrics = json::array();
  for (const auto& m : v.metrics) metrics.push_back(metric_json(m));
  j["metrics"] = metrics;
  j["throttled_trials"] = {{"candidate", v.throttled_candidate}, {"baseline", v.throttled_baseline}};
  j["median_gate"] = gate_json(v.median_gate);
  j["median_gate_cpu"] = gate_json(v.median_gate_cpu);
  return j;
}

std::string ab_markdown(const BenchAbResult& r) {
  std::vector<const AbScenarioVerdict*> rows;
  for (const auto& s : r.scenarios) rows.push_back(&s);
  std::stable_sort(rows.begin(), rows.end(), [](auto* a, auto* b) { return order_of(*a) < order_of(*b); });
  std::ostringstream os;
  const int regressed = r.regressed(), failed = r.failed();
  os << "## shoplens bench: candidate vs baseline\n\n"
     << (regressed ? fmt::format("**{} of {} scenarios regressed**", regressed, r.scenarios.size())
                   : fmt::format("No regression in {} scenarios", r.scenarios.size()))
     << (failed ? fmt::format(", {} failed", failed) : "")
     << (regressed && r.fail_on == FailOn::kNever ? " (warning only: --fail-on never)" : "") << ".\n\n"
     << "- candidate: `" << r.candidate_name << "`\n- baseline: `" << r.baseline_name << "`\n\n"
     << "| scenario | verdict | " << (r.time_metric == "cpu" ? "images per CPU-s" : "images/s")
     << " change [interval] | p (slower) | peak RSS change | peak tensors change | median gate |\n"
        "|---|---|---|---|---|---|---|\n";
  for (const auto* s : rows) os << md_row(*s);
  const auto& first = r.scenarios.empty() || r.scenarios.front().metrics.empty() ? AbMetricVerdict{}
                                                                                 : r.scenarios.front().metrics.front();
  os << fmt::format(
      "\nChange: the Hodges-Lehmann estimate of candidate / baseline - 1 with its {:.0f}% interval ({}); a "
      "regression is significant (p < {:.2f}) and beyond the limit. ▼ worse, ▲ better, = no significant change "
      "beyond the limit.\n",
      first.shift.confidence * 100, first.paired ? "paired trials, Wilcoxon signed-rank" : "Mann-Whitney",
      1 - first.shift.confidence);
  return os.str();
}

std::string ab_junit(const BenchAbResult& r, const std::string& suite_name) {
  std::ostringstream os;
  os << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n"
     << fmt::format("  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\">\n", xml_escape(suite_name),
                    r.scenarios.size(), r.fail_on == FailOn::kRegression ? r.regressed() : 0, r.failed());
  for (const auto& s : r.scenarios) {
    os << fmt::format("    <testcase classname=\"{}\" name=\"{}\">\n", xml_escape(suite_name), xml_escape(s.scenario));
    const std::string row = md_row(s);
    if (!s.error.empty())
      os << fmt::format("      <error message=\"{}\" type=\"ScenarioFailed\"/>\n", xml_escape(s.error));
    else if (s.regressed() && r.fail_on == FailOn::kRegression)
      os << fmt::format("      <failure message=\"{}\" type=\"Regression\"/>\n", xml_escape(row));
    os << fmt::format("      <system-out>{}</system-out>\n    </testcase>\n", xml_escape(row));
  }
  os << "  </testsuite>\n</testsuites>\n";
  return os.str();
}

}  // namespace shoplens
