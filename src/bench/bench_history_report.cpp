// `shoplens bench report`: the history page (bench_history.h).
#include <algorithm>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "shoplens/bench/bench_history.h"
#include "shoplens/core/atomic_file.h"
#include "shoplens/core/stats.h"
#include "shoplens/core/strings.h"
#include "shoplens/core/svg_chart.h"

namespace shoplens {
namespace {

constexpr std::size_t kTableRuns = 10;

// Every scenario name in the order runs first show it.
std::vector<std::string> scenario_names(const std::vector<HistoryRun>& runs) {
  std::vector<std::string> names;
  for (const auto& r : runs)
    for (const auto& s : r.scenarios)
      if (std::find(names.begin(), names.end(), s.name) == names.end()) names.push_back(s.name);
  return names;
}

// One scenario's trials per run (empty where the run lacks it or it failed).
std::vector<std::vector<double>> trials_of(const std::vector<HistoryRun>& runs, const std::string& name) {
  std::vector<std::vector<double>> out(runs.size());
  for (std::size_t i = 0; i < runs.size(); ++i)
    for (const auto& s : runs[i].scenarios)
      if (s.name == name && s.status == "ok") out[i] = s.trials;
  return out;
}

std::string run_note(const HistoryRun& r) { return r.date + " " + r.commit.substr(0, 12); }

void write_scenario_chart(std::ostringstream& os, const std::vector<HistoryRun>& runs, const std::string& name) {
  const auto trials = trials_of(runs, name);
  ChartSeries points{"trials", "#7f9fbf", {}, false, false, {}};
  ChartSeries medians{"median", "#1f4e79", {}, true, false, {}};
  ChartSeries changes{"change point", "#c0392b", {}, false, false, {}};
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto x = static_cast<double>(i + 1);
    for (double t : trials[i]) {
      points.points.emplace_back(x, t);
      points.notes.push_back(run_note(runs[i]));
    }
    if (trials[i].empty()) continue;
    medians.points.emplace_back(x, percentile(trials[i], 0.5));
    medians.notes.push_back(run_note(runs[i]));
  }
  const auto cps = change_points(trials);
  for (std::size_t k : cps) {
    changes.points.emplace_back(static_cast<double>(k + 1), percentile(trials[k], 0.5));
    changes.notes.push_back("level changes at " + run_note(runs[k]));
  }
  std::vector<ChartSeries> series{points, medians};
  if (!changes.points.empty()) series.push_back(changes);
  os << "<section class=\"scenario\">\n<h2>" << xml_escape(name) << "</h2>\n"
     << svg_chart(name, {"run", false, false, true}, {"images/s", false, true, false}, series);
  std::string where;
  for (std::size_t k : cps) where += (where.empty() ? "" : ", ") + fmt::format("run {} ({})", k + 1, run_note(runs[k]));
  os << "<p>" << (cps.empty() ? "No change point." : "Change points: " + xml_escape(where) + ".")
     << "</p>\n</section>\n";
}

void write_runs_table(std::ostringstream& os, const std::vector<HistoryRun>& runs) {
  const std::size_t first = runs.size() > kTableRuns ? runs.size() - kTableRuns : 0;
  os << fmt::format("<h2>The last {} runs</h2>\n", runs.size() - first)
     << "<table>\n<tr><th>run</th><th>date</th><th>commit</th><th>host</th><th>GPU</th><th>torch</th>"
        "<th>scenarios</th></tr>\n";
  for (std::size_t i = runs.size(); i-- > first;) {
    const auto& r = runs[i];
    const auto failed = std::count_if(r.scenarios.begin(), r.scenarios.end(), [](auto& s) { return s.status != "ok"; });
    int throttled = 0;
    for (const auto& s : r.scenarios) throttled += s.throttled_trials;
    os << fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}{}</td></tr>\n",
                      i + 1, xml_escape(r.date), xml_escape(r.commit.substr(0, 12)), xml_escape(r.host),
                      xml_escape(r.gpu.empty() ? "none" : r.gpu + " (" + r.driver + ")"), xml_escape(r.torch),
                      r.scenarios.size(),
                      (failed ? fmt::format(", {} failed", failed) : "") +
                          (throttled ? fmt::format(", GPU throttled in {} trials", throttled) : ""));
  }
  os << "</table>\n";
}

}  // namespace

std::string history_html(const std::vector<HistoryRun>& runs) {
  std::ostringstream os;
  os << "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n<meta "
        "charset=\"utf-8\"/>\n<title>shoplens bench history</title>\n<style>body{font-family:sans-serif;"
        "max-width:1280px;padding:0 16px;box-sizing:border-box;margin:2em auto;}table{border-collapse:collapse;"
        "max-width:100%}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;overflow-wrap:anywhere}"
        "svg{max-width:100%;height:auto;border:1px solid #eee}</style>\n</head>\n<body>\n"
     << fmt::format(
            "<h1>Benchmark history</h1>\n<p>{} runs, from {} to {}. Each point is one trial (images/s), "
            "the line the median of its run; a red marker is a change point: the runs before and after it "
            "differ (Mann-Whitney, p &lt; 0.01) by more than 5%.</p>\n",
            runs.size(), xml_escape(runs.front().date), xml_escape(runs.back().date));
  for (const auto& name : scenario_names(runs)) write_scenario_chart(os, runs, name);
  write_runs_table(os, runs);
  os << "</body>\n</html>\n";
  return os.str();
}

std::filesystem::path write_history_report(const std::filesystem::path& history, const std::filesystem::path& out) {
  const auto runs = load_history(history);
  std::filesystem::create_directories(out);
  auto page = out / "index.html";
  write_file_atomic(page, history_html(runs));
  return page;
}

}  // namespace shoplens
