// End-to-end: `shoplens bench --against` (the same-machine A/B: alternating child trials, the
// verdict's outputs, the checks made before any trial), and the history (`bench --history` appends,
// `bench report` writes a page of 10 runs that renders cleanly in headless Chromium with its trend
// charts and change points).
#include <gtest/gtest.h>

#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "scratch_suite.h"
#include "test_util.h"

namespace shoplens {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::run_shoplens;

class E2eBenchAb : public testing::ScratchSuite<E2eBenchAb> {
 protected:
  // One tiny scenario: a child trial is mostly the program starting.
  static fs::path tiny_config(const std::string& file, int image_size) {
    const fs::path path = scratch() / file;
    testing::write_text(path, json{{"format", "shoplens-bench"},
                                   {"defaults",
                                    {{"model", "small_cnn"},
                                     {"batch", 4},
                                     {"num_classes", 3},
                                     {"warmup_steps", 0},
                                     {"steps", 1},
                                     {"trials", 2},
                                     {"threads", 1}}},
                                   {"scenarios", json::array({{{"name", "tiny"}, {"image_size", image_size}}})}}
                                  .dump());
    return path;
  }
};

TEST_F(E2eBenchAb, AlternatingTrialsGiveAVerdictForThroughputAndMemory) {
  const auto base = tiny_config("base.json", 16), other = tiny_config("other.json", 24);
  const fs::path out = scratch() / "ab";
  const auto r = run_shoplens(fmt::format("bench --config {} --against-config {} --out {} --fail-on never 2>&1",
                                          other.string(), base.string(), out.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("candidate vs baseline"), std::string::npos) << r.output;
  std::istringstream lines(testing::read_text(out / "ab.jsonl"));
  std::string line;
  ASSERT_TRUE(std::getline(lines, line));
  const json j = json::parse(line);
  EXPECT_EQ(j["name"], "tiny");
  ASSERT_GE(j["metrics"].size(), 3U) << j.dump(2);  // wall, CPU, peak RSS (and tensors)
  EXPECT_EQ(j["metrics"][0]["metric"], "images_per_second");
  EXPECT_EQ(j["metrics"][0]["candidate"].size(), 6U);  // at least 6 pairs whatever the config says
  EXPECT_EQ(j["metrics"][0]["baseline"].size(), 6U);
  EXPECT_TRUE(j["metrics"][0].contains("change_low")) << j.dump(2);
  EXPECT_TRUE(j["median_gate"]["compared"]);
  // Each side's trials ran as their own children, one folder each.
  EXPECT_TRUE(fs::exists(out / "trials" / "candidate" / "tiny-5" / "results.jsonl"));
  EXPECT_TRUE(fs::exists(out / "trials" / "baseline" / "tiny-0" / "results.jsonl"));
  EXPECT_TRUE(fs::exists(out / "ab.md"));
  EXPECT_NE(testing::read_text(out / "junit.xml").find("<testcase"), std::string::npos);
}

// Against a stored run the candidate runs once with all its trials in a row, as the stored run did.
TEST_F(E2eBenchAb, AStoredRunIsComparedUnpairedWithTheCandidatesTrialsInOneProcess) {
  const auto config = tiny_config("stored.json", 16);
  const fs::path recorded = scratch() / "recorded";
  auto r = run_shoplens(fmt::format("bench --config {} --trials 6 --out {} 2>&1", config.string(), recorded.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const fs::path out = scratch() / "ab-stored";
  r = run_shoplens(fmt::format("bench --config {} --against-results {} --time-metric cpu --out {} --fail-on never 2>&1",
                               config.string(), (recorded / "results.jsonl").string(), out.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json j = json::parse(testing::read_text(out / "ab.jsonl"));
  EXPECT_EQ(j["metrics"][0]["paired"], false);
  EXPECT_EQ(j["metrics"][0]["candidate"].size(), 6U);
  EXPECT_EQ(j["metrics"][0]["baseline"].size(), 6U);
  EXPECT_EQ(j["metrics"][1]["metric"], "images_per_cpu_second");  // the stored run's per-trial CPU rates
  EXPECT_EQ(j["metrics"][1]["gated"], true);
  EXPECT_TRUE(fs::exists(out / "trials" / "candidate" / "tiny" / "results.jsonl"));
}

TEST_F(E2eBenchAb, MismatchedScenariosAndMissingProgramsFailBeforeAnyTrial) {
  const auto base = tiny_config("base2.json", 16);
  const fs::path other = scratch() / "renamed.json";
  testing::write_text(other, R"({"format": "shoplens-bench", "scenarios": [{"name": "else", "model": "small_cnn"}]})");
  auto r = run_shoplens(fmt::format("bench --config {} --against-config {} --out {} 2>&1", base.string(),
                                    other.string(), (scratch() / "x").string()));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("'tiny'"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(scratch() / "x" / "trials"));
  r = run_shoplens(fmt::format("bench --config {} --against /nonexistent/shoplens --out {} 2>&1", base.string(),
                               (scratch() / "y").string()));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("/nonexistent/shoplens"), std::string::npos) << r.output;
}

TEST_F(E2eBenchAb, HistoryAppendsRunsAndTheReportOfTenRunsRendersCleanly) {
  const auto base = tiny_config("hist.json", 16);
  const fs::path history = scratch() / "history";
  // Nine earlier runs, the last four 20% slower (a change point), then one real run appended.
  std::string lines;
  for (int i = 0; i < 9; ++i) {
    const double level = i < 5 ? 100 : 80;
    lines += json{{"format", "shoplens-bench-history"},
                  {"commit", fmt::format("{:040x}", i + 1)},
                  {"date", fmt::format("2026-11-{:02}T10:00:00Z", i + 1)},
                  {"host", "runner-a-with-a-long-host-name"},
                  {"gpu", ""},
                  {"torch", "LibTorch 1.13.1"},
                  {"scenarios", json::array({{{"name", "tiny"}, {"trials", {level, level * 1.01, level * 0.99}}},
                                             {{"name", "small_cnn_fp32_b16_cpu_t2_with_a_long_name"},
                                              {"trials", {50 + i, 51 + i, 49 + i}}}})}}
                 .dump() +
             "\n";
  }
  testing::write_text(history / "history.jsonl", lines);
  auto r = run_shoplens(fmt::format("bench --config {} --history {} --out {} 2>&1", base.string(), history.string(),
                                    (scratch() / "hist-out").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(testing::occurrences(testing::read_text(history / "history.jsonl"), "shoplens-bench-history"), 10U);
  r = run_shoplens(
      fmt::format("bench report --history {} --out {} 2>&1", history.string(), (scratch() / "site").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const fs::path page = scratch() / "site" / "index.html";
  const std::string html = testing::read_text(page);
  EXPECT_NE(html.find("Change points: run 6"), std::string::npos);
  for (const int width : {1280, 800}) {
    const json check = testing::check_page_in_browser(page, {width, width == 1280 ? "bench-history-10-runs" : ""});
    EXPECT_TRUE(check["problems"].empty()) << check.dump(2);
    EXPECT_TRUE(check["console"].empty()) << check.dump(2);
    EXPECT_EQ(check["page"]["scroll_width"], check["page"]["viewport_width"]) << check["page"].dump();
    EXPECT_EQ(check["charts"], 2) << check.dump(2);
  }
}

TEST_F(E2eBenchAb, ABrokenHistoryFailsBeforeAnyScenario) {
  const fs::path history = scratch() / "broken-history";
  testing::write_text(history / "history.jsonl", "{\"format\": \"something else\"}\n");
  const auto r =
      run_shoplens(fmt::format("bench --config {} --history {} --out {} 2>&1", tiny_config("b.json", 16).string(),
                               history.string(), (scratch() / "broken-out").string()));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("history.jsonl:1"), std::string::npos) << r.output;
}

// The example CI workflows of docs/BENCH.md parse as YAML (PyYAML, an independent parser) and have
// the shape each CI system needs: a GPU runner, the A/B step, the reports.
TEST_F(E2eBenchAb, TheExampleWorkflowsAreValidYaml) {
  const std::string dir = testing::source_dir() + "/scripts/ci-examples";
  const auto r = testing::run_shell(testing::python() + " - " + dir + R"( 2>&1 <<'PY'
import sys, yaml
d = sys.argv[1]
gh = yaml.safe_load(open(d + "/github-actions-gpu.yml"))
on = gh.get("on", gh.get(True))  # YAML 1.1 reads the key `on` as true
assert "pull_request" in on and "push" in on, on
job = gh["jobs"]["bench"]
assert "self-hosted" in job["runs-on"] and "gpu" in job["runs-on"], job["runs-on"]
runs = " ".join(s.get("run", "") for s in job["steps"])
assert "--against" in runs and "bench report --history" in runs and "GITHUB_STEP_SUMMARY" in runs, runs
gl = yaml.safe_load(open(d + "/gitlab-ci-gpu.yml"))
bench = gl["bench"]
assert "gpu" in bench["tags"], bench
assert bench["artifacts"]["reports"]["junit"] == "bench-out/junit.xml", bench["artifacts"]
assert any("--against" in line for line in bench["script"]), bench["script"]
print("workflows ok")
PY)");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("workflows ok"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace shoplens
