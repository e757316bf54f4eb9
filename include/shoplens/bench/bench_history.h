// `shoplens bench --history DIR` and `shoplens bench report` (docs/BENCH.md, "History"): every
// run appended to DIR/history.jsonl with where it ran and every scenario's trials, and a static
// HTML page with one trend chart per scenario (every trial a point, the median a line, detected
// change points marked) and a table of the last runs. Plain C++.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shoplens/bench/bench_results.h"

namespace shoplens {

struct HistoryScenario {
  std::string name;
  std::string status = "ok";   // ok | failed
  std::vector<double> trials;  // images/s per trial
  std::int64_t peak_rss_bytes = -1;
  int throttled_trials = 0;  // trials in which the GPU throttled
};

struct HistoryRun {
  std::string commit, date, host, cpu, gpu, driver, torch;
  std::vector<HistoryScenario> scenarios;
};

// The run as history keeps it; `timestamp` is the UTC time it is appended (ISO 8601).
HistoryRun history_run(const std::vector<ScenarioResult>& results, const BenchEnvironment& env,
                       const std::string& timestamp);
nlohmann::json history_run_json(const HistoryRun& run);
// ConfigError naming file:line for a line that is not a run.
std::vector<HistoryRun> parse_history(std::string_view text, const std::string& origin);

// DIR/history.jsonl, created with DIR when missing; rewritten atomically with the new line added.
std::filesystem::path append_history(const std::filesystem::path& dir, const HistoryRun& run);
std::vector<HistoryRun> load_history(const std::filesystem::path& dir);
// The runs so far; none when DIR/history.jsonl does not exist yet. ConfigError for a broken file.
std::vector<HistoryRun> load_history_or_none(const std::filesystem::path& dir);
// Now in UTC, ISO 8601 to the second (2026-11-29T04:10:00Z).
std::string utc_timestamp();

// Indices k of a series of runs (each its trials) where the level changes: the runs in a window
// of `window` before k and from k on differ by a Mann-Whitney test at two-sided p < `alpha`, by
// more than `min_change` (relative), and k has the smallest p among its neighbours (the earlier on a tie).
std::vector<std::size_t> change_points(const std::vector<std::vector<double>>& runs, std::size_t window = 3,
                                       double alpha = 0.01, double min_change = 0.05);

std::string history_html(const std::vector<HistoryRun>& runs);
// `shoplens bench report --history DIR --out SITE`: SITE/index.html. Returns its path.
std::filesystem::path write_history_report(const std::filesystem::path& history, const std::filesystem::path& out);

}  // namespace shoplens
