#include "shoplens/bench/bench_history.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <sstream>

#include <fmt/format.h>

#include "shoplens/bench/bench_stats.h"
#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/json_lines.h"
#include "shoplens/core/stats.h"
#include "shoplens/core/strings.h"

namespace shoplens {
namespace {

using json = nlohmann::json;

constexpr const char* kHistoryFile = "history.jsonl";

std::string text_field(const json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

HistoryScenario scenario_from(const json& s, const std::string& where) {
  if (!s.is_object() || !s.contains("name") || !s["name"].is_string())
    throw ConfigError(where + ": a scenario without a \"name\"");
  HistoryScenario h;
  h.name = s["name"].get<std::string>();
  h.status = s.value("status", "ok");
  if (s.contains("trials")) {
    if (!s["trials"].is_array()) throw ConfigError(where + ": " + h.name + ".trials must be a list");
    for (const auto& v : s["trials"]) {
      if (!v.is_number()) throw ConfigError(where + ": " + h.name + ".trials must hold numbers");
      h.trials.push_back(v.get<double>());
    }
  }
  if (s.contains("throttled_trials") && s["throttled_trials"].is_number_integer())
    h.throttled_trials = s["throttled_trials"].get<int>();
  if (s.contains("peak_rss_bytes") && s["peak_rss_bytes"].is_number_integer())
    h.peak_rss_bytes = s["peak_rss_bytes"].get<std::int64_t>();
  return h;
}

}  // namespace

HistoryRun history_run(const std::vector<ScenarioResult>& results, const BenchEnvironment& env,
                       const std::string& timestamp) {
  HistoryRun run;
  run.commit = env.commit;
  run.date = timestamp;
  run.host = env.hostname;
  run.cpu = env.cpu_model;
  run.gpu = env.device_name;
  run.driver = env.driver;
  run.torch = env.torch_version;
  for (const auto& r : results)
    run.scenarios.push_back({r.scenario.name, r.error.empty() ? "ok" : "failed", r.trial_images_per_second,
                             r.peak_rss_bytes, r.throttled_trials()});
  return run;
}

json history_run_json(const HistoryRun& run) {
  json scenarios = json::array();
  for (const auto& s : run.scenarios)
    scenarios.push_back({{"name", s.name},
                         {"status", s.status},
                         {"trials", s.trials},
                         {"peak_rss_bytes", s.peak_rss_bytes},
                         {"throttled_trials", s.throttled_trials}});
  return {{"format", "shoplens-bench-history"},
          {"commit", run.commit},
          {"date", run.date},
          {"host", run.host},
          {"cpu", run.cpu},
          {"gpu", run.gpu},
          {"driver", run.driver},
          {"torch", run.torch},
          {"scenarios", scenarios}};
}

std::vector<HistoryRun> parse_history(std::string_view text, const std::string& origin) {
  std::vector<HistoryRun> runs;
  for_each_json_line<ConfigError>(text, origin, [&](const json& j, const std::string& where) {
    if (j.value("format", "") != "shoplens-bench-history")
      throw ConfigError(where + ": not a bench history line (\"format\": \"shoplens-bench-history\")");
    if (!j.contains("scenarios") || !j["scenarios"].is_array()) throw ConfigError(where + ": no \"scenarios\" list");
    HistoryRun run;
    run.commit = text_field(j, "commit");
    run.date = text_field(j, "date");
    run.host = text_field(j, "host");
    run.cpu = text_field(j, "cpu");
    run.gpu = text_field(j, "gpu");
    run.driver = text_field(j, "driver");
    run.torch = text_field(j, "torch");
    for (const auto& s : j["scenarios"]) run.scenarios.push_back(scenario_from(s, where));
    runs.push_back(std::move(run));
  });
  return runs;
}

std::filesystem::path append_history(const std::filesystem::path& dir, const HistoryRun& run) {
  std::filesystem::create_directories(dir);
  auto file = dir / kHistoryFile;
  std::string text = std::filesystem::exists(file) ? read_file(file) : std::string();
  parse_history(text, file.string());  // never append to a file that is not a history
  if (!text.empty() && text.back() != '\n') text += '\n';
  write_file_atomic(file, text + history_run_json(run).dump() + "\n");
  return file;
}

std::vector<HistoryRun> load_history(const std::filesystem::path& dir) {
  const auto file = dir / kHistoryFile;
  if (!std::filesystem::is_regular_file(file)) throw ConfigError("--history " + dir.string() + ": no " + kHistoryFile);
  auto runs = parse_history(read_file(file), file.string());
  if (runs.empty()) throw ConfigError(file.string() + ": no runs");
  return runs;
}

std::vector<HistoryRun> load_history_or_none(const std::filesystem::path& dir) {
  const auto file = dir / kHistoryFile;
  if (!std::filesystem::exists(file)) return {};
  return parse_history(read_file(file), file.string());
}

std::string utc_timestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32] = {};
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

std::vector<std::size_t> change_points(const std::vector<std::vector<double>>& runs, std::size_t window, double alpha,
                                       double min_change) {
  std::vector<double> strength(runs.size(), 0.0);
  for (std::size_t k = 1; k < runs.size(); ++k) {
    std::vector<double> before, after;
    for (std::size_t i = k >= window ? k - window : 0; i < k; ++i)
      for (double v : runs[i])
        if (v > 0) before.push_back(std::log(v));
    for (std::size_t i = k; i < std::min(runs.size(), k + window); ++i)
      for (double v : runs[i])
        if (v > 0) after.push_back(std::log(v));
    if (before.empty() || after.empty()) continue;
    const ShiftEstimate e = two_sample_shift(after, before);
    const double p = 2 * std::min(e.p_lower, e.p_higher);
    // The strongest evidence marks the step: a window that straddles it is only partly shifted.
    if (p < alpha && std::fabs(std::exp(e.estimate) - 1) > min_change) strength[k] = -std::log(p);
  }
  std::vector<std::size_t> out;
  for (std::size_t k = 1; k < runs.size(); ++k) {
    if (strength[k] <= 0) continue;
    bool strongest = true;
    for (std::size_t i = k >= window ? k - window + 1 : 0; i < std::min(runs.size(), k + window); ++i)
      if (i != k && (strength[i] > strength[k] || (strength[i] == strength[k] && i < k))) strongest = false;
    if (strongest) out.push_back(k);
  }
  return out;
}

}  // namespace shoplens
