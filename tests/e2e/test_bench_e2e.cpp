// End-to-end: `shoplens bench` on a tiny CPU matrix (synthetic tensors, find-batch's "auto" and
// real shards through the loader), its four outputs, recommend reading its JSON lines, and the
// regression gate: a pass, a doctored baseline that fails naming the scenario, bad baselines.
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sanitizer.h"
#include "scratch_suite.h"
#include "test_util.h"

namespace shoplens {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::run_shoplens;

std::vector<json> read_jsonl(const fs::path& p) {
  std::vector<json> out;
  std::istringstream lines(testing::read_text(p));
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}

// python3's XML parser: a well-formedness check independent of our writer; prints
// "<testcases> <failures> <errors> <names of failed testcases>".
std::string junit_summary(const fs::path& xml) {
  auto r = testing::run_shell(testing::python() +
                              " -c \"import sys, xml.etree.ElementTree as ET; r = ET.parse(sys.argv[1]).getroot(); "
                              "c = r.findall('.//testcase'); "
                              "print(len(c), len(r.findall('.//failure')), len(r.findall('.//error')), "
                              "' '.join(t.get('name') for t in c if t.find('failure') is not None))\" " +
                              xml.string() + " 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return std::string(r.output.substr(0, r.output.find_last_not_of('\n') + 1));
}

class E2eBench : public testing::ScratchSuite<E2eBench> {
 protected:
  static void SetUpTestSuite() {
    // find-batch's cache goes to the scratch folder, not the user's (the children inherit it).
    if (const char* old = std::getenv("XDG_CACHE_HOME")) old_cache_ = new std::string(old);
    setenv("XDG_CACHE_HOME", (scratch() / "cache").string().c_str(), 1);
    shards_ = testing::shared_image_data({64, "40:56", 3, 24, 64, 1}) / "shards";
    // The recorded run the tests compare against, made once for every test process.
    recorded_ = testing::shared_fixture("bench-recorded", [](const fs::path& dir) {
      testing::write_text(dir / "bench.json", config().dump(2));
      auto r = run_shoplens("bench --config " + (dir / "bench.json").string() + " --out " + (dir / "out").string() +
                            " 2>&1");
      return r.exit_code == 0 ? std::string() : r.output;
    });
  }
  // Small enough for a loaded 2-core machine: three scenarios, a few steps each.
  static json config() {
    return {{"format", "shoplens-bench"},
            {"name", "e2e"},
            {"defaults",
             {{"model", "small_cnn"},
              {"image_size", 16},
              {"warmup_steps", 1},
              {"steps", 3},
              {"trials", 3},
              {"threads", 1},
              {"memory_budget", "32MiB"}}},
            {"matrix", {{"batch", {4, "auto"}}}},
            {"scenarios",
             {{{"name", "shards-b4"},
               {"batch", 4},
               {"data", "shards"},
               {"shards", shards_.string()},
               {"loader_workers", 1}}}}};
  }
  static void TearDownTestSuite() {
    if (old_cache_)
      setenv("XDG_CACHE_HOME", old_cache_->c_str(), 1);
    else
      unsetenv("XDG_CACHE_HOME");
    delete old_cache_;
    ScratchSuite::TearDownTestSuite();
  }
  static fs::path out() { return recorded_ / "out"; }
  static std::string bench(const std::string& args) {
    return "bench --config " + (recorded_ / "bench.json").string() + " " + args;
  }
  static fs::path shards_, recorded_;
  static std::string* old_cache_;
};
std::string* E2eBench::old_cache_ = nullptr;
fs::path E2eBench::shards_, E2eBench::recorded_;

TEST_F(E2eBench, RecordsEveryScenarioInFourFormats) {
  const auto lines = read_jsonl(out() / "results.jsonl");
  ASSERT_EQ(lines.size(), 3u);
  for (const auto& j : lines) {
    SCOPED_TRACE(j.dump());
    EXPECT_EQ(j["status"], "ok");
    EXPECT_GT(j["images_per_second"].get<double>(), 0);
    EXPECT_EQ(j["trial_images_per_second"].size(), 3u);
    EXPECT_LE(j["step_ms_p50"].get<double>(), j["step_ms_p95"].get<double>());
    EXPECT_LE(j["step_ms_p95"].get<double>(), j["step_ms_p99"].get<double>());
    EXPECT_GT(j["peak_rss_bytes"].get<double>(), 0);
    EXPECT_GT(j["peak_allocated_bytes"].get<double>(), 0);
    EXPECT_GT(j["cpu_utilisation"].get<double>(), 0);
    EXPECT_FALSE(j["commit"].get<std::string>().empty());
    EXPECT_FALSE(j["torch"].get<std::string>().empty());
    EXPECT_EQ(j["vcpus"], 1);
    // The implementation that stepped (auto resolved), not the request.
    const std::string impl = j["optimizer_impl"];
    EXPECT_TRUE(impl == "fused" || impl == "foreach") << impl;
  }
  EXPECT_EQ(lines[0]["name"], "small_cnn-fp32-b4-cpu-t1");
  EXPECT_EQ(lines[0]["data_wait_seconds"].get<double>(), 0);  // synthetic: no loader
  EXPECT_EQ(lines[1]["name"], "small_cnn-fp32-bauto-cpu-t1");
  EXPECT_EQ(lines[1]["batch_source"], "auto");
  EXPECT_GT(lines[1]["batch"].get<int>(), 4);  // find-batch under 32 MiB fits more than 4 images of 16 px
  EXPECT_EQ(lines[2]["name"], "shards-b4");
  EXPECT_EQ(lines[2]["data"], "shards");
  EXPECT_GT(lines[2]["data_wait_seconds"].get<double>(), 0);  // the loader was asked for every batch

  EXPECT_EQ(junit_summary(out() / "junit.xml"), "3 0 0 ");
  const std::string csv = testing::read_text(out() / "results.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 4);
  const std::string md = testing::read_text(out() / "results.md");
  EXPECT_NE(md.find("| shards-b4 |"), std::string::npos) << md;

  // recommend reads the recorder's lines as they are.
  auto rec =
      run_shoplens("recommend --bench " + (out() / "results.jsonl").string() + " --prices " + testing::source_dir() +
                   "/configs/prices.json --scenario small_cnn-fp32-b4-cpu-t1 --format json");
  EXPECT_EQ(rec.exit_code, 0) << rec.output;
}

TEST_F(E2eBench, BaselineGatePassesOnItselfAndFailsOnADoctoredBaselineNamingTheScenario) {
  // Against its own results: a generous threshold, since a loaded 2-core machine can be slower
  // on a second run; the gate's arithmetic is pinned by the unit tests (BenchGate.*).
  auto pass = run_shoplens(bench("--out " + (scratch() / "pass").string() + " --baseline " +
                                 (out() / "results.jsonl").string() + " --max-regression 90% 2>&1"));
  EXPECT_EQ(pass.exit_code, 0) << pass.output;
  EXPECT_NE(pass.output.find("ok small_cnn-fp32-b4-cpu-t1: "), std::string::npos)
      << pass.output;  // compared, not skipped
  EXPECT_EQ(junit_summary(scratch() / "pass/junit.xml"), "3 0 0 ");

  // A baseline claiming the synthetic batch-4 scenario once ran 100x faster, with no noise, and
  // the others 100x slower (so that the load of a busy machine cannot make them regress).
  std::string doctored;
  for (auto j : read_jsonl(out() / "results.jsonl")) {
    const double factor = j["name"] == "small_cnn-fp32-b4-cpu-t1" ? 100.0 : 0.01;
    if (j.contains("images_per_second") && j["images_per_second"].is_number()) {
      const double v = j["images_per_second"].get<double>() * factor;
      j["images_per_second"] = v;
      j["trial_images_per_second"] = {v, v, v};
    }
    doctored += j.dump() + "\n";
  }
  testing::write_text(scratch() / "doctored.jsonl", doctored);
  auto fail = run_shoplens(bench("--out " + (scratch() / "fail").string() + " --baseline " +
                                 (scratch() / "doctored.jsonl").string() + " --max-regression 5% --trials 2 2>&1"));
  EXPECT_EQ(fail.exit_code, 1) << fail.output;
  EXPECT_NE(fail.output.find("REGRESSION small_cnn-fp32-b4-cpu-t1"), std::string::npos) << fail.output;
  EXPECT_EQ(fail.output.find("REGRESSION shards-b4"), std::string::npos) << fail.output;
  EXPECT_EQ(junit_summary(scratch() / "fail/junit.xml"), "3 1 0 small_cnn-fp32-b4-cpu-t1");

  // Warn-only: the same regression is reported, and the run succeeds.
  auto warn = run_shoplens(bench("--out " + (scratch() / "warn").string() + " --baseline " +
                                 (scratch() / "doctored.jsonl").string() +
                                 " --max-regression 5% --trials 2 --fail-on never 2>&1"));
  EXPECT_EQ(warn.exit_code, 0) << warn.output;
  EXPECT_NE(warn.output.find("REGRESSION small_cnn-fp32-b4-cpu-t1"), std::string::npos) << warn.output;
  EXPECT_NE(warn.output.find("--fail-on never"), std::string::npos) << warn.output;
}

// batch "auto" on shards with a budget that would allow more than the training split holds: the
// search stops at the split's size and the scenario runs (it once found more, then refused to run).
TEST_F(E2eBench, AutoBatchOnShardsNeverExceedsTheTrainingSplit) {
  const json report = json::parse(testing::read_text(shards_ / "report.json"));
  int train_samples = 0;
  for (const auto& [name, splits] : report["per_class"].items()) train_samples += splits["train"].get<int>();
  const json config = {{"format", "shoplens-bench"},
                       {"name", "capped"},
                       {"defaults",
                        {{"model", "small_cnn"},
                         {"image_size", 16},
                         {"warmup_steps", 1},
                         {"steps", 2},
                         {"trials", 1},
                         {"threads", 1},
                         {"memory_budget", "512MiB"}}},
                       {"scenarios",
                        {{{"name", "shards-auto"},
                          {"batch", "auto"},
                          {"data", "shards"},
                          {"shards", shards_.string()},
                          {"loader_workers", 1}}}}};
  testing::write_text(scratch() / "capped.json", config.dump(2));
  auto r = run_shoplens("bench --config " + (scratch() / "capped.json").string() + " --out " +
                        (scratch() / "capped").string() + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("the batch search stops at " + std::to_string(train_samples)), std::string::npos) << r.output;
  const auto lines = read_jsonl(scratch() / "capped/results.jsonl");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_LE(lines[0]["batch"].get<int>(), train_samples);
  EXPECT_GE(lines[0]["batch"].get<int>(), train_samples / 2);  // the budget is not what limits it
}

TEST_F(E2eBench, MissingOrMalformedBaselineOrConfigIsAUsageError) {
  auto missing = run_shoplens(
      bench("--out " + (scratch() / "x").string() + " --baseline " + (scratch() / "nope.jsonl").string() + " 2>&1"));
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("nope.jsonl does not exist"), std::string::npos) << missing.output;

  testing::write_text(scratch() / "bad.jsonl", "{\"name\": \"a\", \"images_per_second\": 3}\n{oops\n");
  auto malformed = run_shoplens(
      bench("--out " + (scratch() / "x").string() + " --baseline " + (scratch() / "bad.jsonl").string() + " 2>&1"));
  EXPECT_EQ(malformed.exit_code, 2) << malformed.output;
  EXPECT_NE(malformed.output.find("bad.jsonl:2"), std::string::npos) << malformed.output;

  auto threshold = run_shoplens(bench("--out " + (scratch() / "x").string() + " --max-regression lots 2>&1"));
  EXPECT_EQ(threshold.exit_code, 2) << threshold.output;

  testing::write_text(scratch() / "typo.json", "{\"matrix\": {\"modle\": [\"small_cnn\"]}}");
  auto typo = run_shoplens("bench --config " + (scratch() / "typo.json").string() + " --out " +
                           (scratch() / "x").string() + " 2>&1");
  EXPECT_EQ(typo.exit_code, 2) << typo.output;
  EXPECT_NE(typo.output.find("did you mean 'model'"), std::string::npos) << typo.output;
  EXPECT_FALSE(fs::exists(scratch() / "x"));  // nothing measured or written before the inputs are checked
}

}  // namespace
}  // namespace shoplens

namespace shoplens {
namespace {

// The batch-size study on the suite's shards: two seeds of two short real trainings, then a
// report that must parse as XML (the whole XHTML document, its inline SVG charts included) and as
// HTML, and render in a real browser with labelled axes and nothing overlapping.
TEST_F(E2eBench, BatchStudyWritesAWellFormedSelfContainedReport) {
  const fs::path study = scratch() / "study";
  auto r = run_shoplens("bench --study batch --shards " + shards_.string() + " --out " + study.string() +
                        " --epochs 2 --seeds 2 --first-seed 7 --baseline-batch 4 --memory-budget 32MiB --threads 1"
                        " --set augment.image_size=16 --set model.name=small_cnn --set find_batch.max_batch=16"
                        // the largest batch that fits, whatever its throughput here: a candidate unlike the baseline
                        " --set find_batch.objective=memory" +
                        testing::process_check_args() + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output << testing::read_text(study / "seed-7" / "find_batch.log");
  ASSERT_TRUE(fs::exists(study / "report.html")) << r.output;
  const auto summary = json::parse(testing::read_text(study / "study.json"));
  EXPECT_EQ(summary["seeds"], 2);
  ASSERT_EQ(summary["runs"].size(), 2u);
  EXPECT_EQ(summary["runs"][1]["seed"], 8);
  EXPECT_EQ(summary["runs"][1]["baseline"]["seed"], 8);  // read back from the run's own config
  EXPECT_EQ(summary["baseline"]["micro_batch"], 4);
  EXPECT_GT(summary["find_batch"]["micro_batch"].get<int>(), 4);
  // lr scaled with the batch: larger batch, larger lr
  EXPECT_GT(summary["find_batch"]["lr"].get<double>(), summary["baseline"]["lr"].get<double>());
  const double f1_mean = (summary["runs"][0]["baseline"]["final_val_macro_f1"].get<double>() +
                          summary["runs"][1]["baseline"]["final_val_macro_f1"].get<double>()) /
                         2;
  EXPECT_NEAR(summary["baseline"]["val_macro_f1_mean"].get<double>(), f1_mean, 1e-12);
  EXPECT_EQ(summary["baseline"]["seconds_to_f1"].size(), 2u);
  // One throughput definition: the ratio of the arms' mean images/s, and the verdict on the terminal.
  EXPECT_NEAR(summary["throughput_ratio"]["of_arm_means"].get<double>(),
              summary["find_batch"]["images_per_second_mean"].get<double>() /
                  summary["baseline"]["images_per_second_mean"].get<double>(),
              1e-9);
  EXPECT_EQ(summary["throughput_ratio"]["per_seed"].size(), 2u);
  EXPECT_NE(r.output.find(summary["goal_met"].get<bool>() ? "goal met: macro-F1 " : "goal NOT met: macro-F1 "),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(fmt::format("throughput {:.2f}x the baseline's",
                                      summary["throughput_ratio"]["of_arm_means"].get<double>())),
            std::string::npos)
      << r.output;
  // Each seed's runs left their logs; different seeds trained differently.
  EXPECT_TRUE(fs::exists(study / "seed-8" / "baseline.log"));
  EXPECT_NE(testing::read_text(study / "seed-7" / "baseline" / "metrics.jsonl"),
            testing::read_text(study / "seed-8" / "baseline" / "metrics.jsonl"));

  auto check = testing::run_shell(
      testing::python() +
      " -c \"import sys, re, xml.etree.ElementTree as ET; from html.parser import HTMLParser; "
      "t = open(sys.argv[1]).read(); HTMLParser().feed(t); "
      "root = ET.fromstring(re.sub(r'^<!DOCTYPE html>', '', t)); "
      "svg = root.findall('.//{http://www.w3.org/2000/svg}svg'); "
      "remote = [m for m in re.findall(r'(?:src|href)=.(https?:[^\\\"]*)', t)]; "
      "print(len(svg), len(root.findall('.//{http://www.w3.org/1999/xhtml}table')), len(remote))\" " +
      (study / "report.html").string() + " 2>&1");
  ASSERT_EQ(check.exit_code, 0) << check.output;
  EXPECT_EQ(check.output, "4 1 0\n");  // four charts, the table, nothing fetched from the network
  const std::string html = testing::read_text(study / "report.html");
  EXPECT_NE(html.find("Macro-F1 difference"), std::string::npos);
  EXPECT_NE(html.find("Trade-offs"), std::string::npos);

  const json browser = testing::check_page_in_browser(study / "report.html", {1280, "bench-study"});
  EXPECT_EQ(browser["charts"], 4) << browser.dump(2);
  EXPECT_TRUE(browser["problems"].empty()) << browser.dump(2);
  EXPECT_TRUE(browser["console"].empty()) << browser.dump(2);
  // The two per-epoch charts (loss, macro-F1) draw both seeds of both arms, each with a point per epoch.
  int per_epoch_charts = 0;
  for (const auto& chart : browser["chart_details"]) {
    if (chart["name"].get<std::string>().find("per epoch") == std::string::npos) continue;
    ++per_epoch_charts;
    for (const char* seed : {"seed 7", "seed 8"})
      for (const char* arm : {"baseline", "find-batch"}) {
        int points = 0;
        for (const auto& s : chart["series"])
          if (s["name"].get<std::string>().rfind(arm, 0) == 0 &&
              s["name"].get<std::string>().find(seed) != std::string::npos)
            points = s["points"].get<int>();
        EXPECT_EQ(points, 2) << chart["name"] << ": " << arm << " " << seed << "\n" << chart.dump(2);
      }
  }
  EXPECT_EQ(per_epoch_charts, 2) << browser.dump(2);
}

// The text workload through the same recorder: a synthetic text scenario (every token real) and
// one on text shards through the real loader (padding measured), then bench-train's text mode.
TEST(E2eBenchText, RecordsTokensPerSecondAndTheLoadersPadding) {
  testing::ScratchDir dir("e2e-bench-text");
  auto made = run_shoplens("make-data --task text --out " + (dir / "text").string() +
                           " --num-examples 200 --max-length 256 --vocab-size 1024 --seed 4");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const json config = {{"format", "shoplens-bench"},
                       {"defaults",
                        {{"model", "text_tiny"},
                         {"num_classes", 2},
                         {"warmup_steps", 1},
                         {"steps", 3},
                         {"trials", 2},
                         {"threads", 1},
                         {"batch", 8}}},
                       {"scenarios",
                        {{{"seq_len", 32}, {"vocab_size", 1024}},
                         // Lengths have a median near 135 (docs/TEXT.md): at 256 few are cut, so rows differ.
                         {{"name", "text-shards"},
                          {"seq_len", 256},
                          {"batch", 4},
                          {"data", "shards"},
                          {"shards", (dir / "text").string()},
                          {"loader_workers", 1}}}}};
  testing::write_text(dir / "bench.json", config.dump(2));
  auto r =
      run_shoplens("bench --config " + (dir / "bench.json").string() + " --out " + (dir / "out").string() + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto lines = read_jsonl(dir / "out" / "results.jsonl");
  ASSERT_EQ(lines.size(), 2u);
  const json& synthetic = lines[0];
  EXPECT_EQ(synthetic["name"], "text_tiny-fp32-b8-cpu-t1-L32");
  EXPECT_EQ(synthetic["status"], "ok") << synthetic.dump();
  EXPECT_EQ(synthetic["seq_len"], 32);
  EXPECT_EQ(synthetic["padding_fraction"].get<double>(), 0.0);  // every token real
  // Every row is 32 real tokens: tokens/s = samples/s x 32 for each trial.
  for (std::size_t i = 0; i < 2; ++i)
    EXPECT_NEAR(synthetic["trial_tokens_per_second"][i].get<double>(),
                synthetic["trial_images_per_second"][i].get<double>() * 32,
                1e-6 * synthetic["tokens_per_second"].get<double>());
  const json& shards = lines[1];
  EXPECT_EQ(shards["status"], "ok") << shards.dump();
  EXPECT_EQ(shards["data"], "shards");
  // Rows of varied length padded to each batch's longest (and a multiple of 8): some slots are empty.
  EXPECT_GT(shards["padding_fraction"].get<double>(), 0.0);
  EXPECT_LT(shards["padding_fraction"].get<double>(), 0.9);
  EXPECT_GT(shards["tokens_per_second"].get<double>(), 0.0);
  EXPECT_LT(shards["tokens_per_second"].get<double>(), shards["images_per_second"].get<double>() * 256);
  EXPECT_GT(shards["data_wait_seconds"].get<double>(), 0);
}

TEST(E2eBenchText, BenchTrainStepsATextModelAtTheGivenLength) {
  auto r = run_shoplens(
      "bench-train --model text_tiny --seq-len 32 --vocab-size 1024 -b 4 --warmup-steps 1 --steps 2 "
      "--threads 1 --format json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json j = json::parse(r.output.substr(r.output.find('{')));
  EXPECT_EQ(j["seq_len"], 32);
  EXPECT_EQ(j["vocab_size"], 1024);
  EXPECT_EQ(j["num_classes"], 2);
  EXPECT_NEAR(j["tokens_per_second"].get<double>(), j["samples_per_second"].get<double>() * 32,
              1e-3 * j["tokens_per_second"].get<double>());
  EXPECT_NEAR(j["samples_per_second"].get<double>(), 4e3 / j["median_step_ms"].get<double>(),
              1e-3 * j["samples_per_second"].get<double>());
  // Text has no images: no image size, no images/s, in any format.
  EXPECT_FALSE(j.contains("image_size")) << j.dump();
  EXPECT_FALSE(j.contains("images_per_second")) << j.dump();
  auto table = run_shoplens("bench-train --model text_tiny --seq-len 8 --vocab-size 64 -b 2 --warmup 0 --steps 1");
  ASSERT_EQ(table.exit_code, 0) << table.output;
  EXPECT_EQ(table.output.find("image_size"), std::string::npos) << table.output;
  EXPECT_EQ(table.output.find("images_per_second"), std::string::npos) << table.output;
  EXPECT_NE(table.output.find("samples_per_second"), std::string::npos) << table.output;

  auto bad = run_shoplens("bench-train --model text_tiny --seq-len 0");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--seq-len"), std::string::npos) << bad.output;
  // --warmup, the old spelling of --warmup-steps, still works and warns.
  auto image = run_shoplens("bench-train --model small_cnn --image-size 16 -b 2 --warmup 0 --steps 1 --format json");
  ASSERT_EQ(image.exit_code, 0) << image.output;
  EXPECT_NE(image.output.find("--warmup is deprecated: use --warmup-steps"), std::string::npos) << image.output;
  EXPECT_EQ(image.output.find("tokens_per_second"), std::string::npos) << image.output;
}

// --optimizer-impl picks the step train's optim.implementation would run, and the record says
// which one stepped (auto resolved), so one GPU session can A/B them.
TEST(E2eBenchTrain, OptimizerImplementationIsChosenAndRecorded) {
  const std::string base =
      "bench-train --model small_cnn --image-size 16 -b 2 --warmup-steps 0 --steps 1 --format json";
  for (const char* impl : {"reference", "foreach"}) {
    auto r = run_shoplens(base + " --optimizer sgd --optimizer-impl " + impl);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(json::parse(r.output.substr(r.output.find('{')))["optimizer_impl"], impl) << r.output;
  }
  auto automatic = run_shoplens(base);
  ASSERT_EQ(automatic.exit_code, 0) << automatic.output;
  const std::string resolved = json::parse(automatic.output.substr(automatic.output.find('{')))["optimizer_impl"];
  EXPECT_TRUE(resolved == "fused" || resolved == "foreach") << automatic.output;
  auto bad = run_shoplens(base + " --optimizer-impl turbo");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--optimizer-impl"), std::string::npos) << bad.output;
}

// --timing window times the trainer's step as one window of --steps steps until the device has
// finished: the record says so and gives the window's mean step, not per-step percentiles.
TEST(E2eBenchTrain, WindowTimingReportsTheMeanStepOfOneWindow) {
  const std::string base =
      "bench-train --model small_cnn --image-size 16 -b 2 --warmup-steps 1 --steps 3 --format json";
  auto step = run_shoplens(base);
  ASSERT_EQ(step.exit_code, 0) << step.output;
  const json each = json::parse(step.output.substr(step.output.find('{')));
  EXPECT_EQ(each["timing"], "step");
  EXPECT_EQ(each["step_seconds"].size(), 3u);
  EXPECT_TRUE(each.contains("p95_step_ms"));
  auto window = run_shoplens(base + " --timing window");
  ASSERT_EQ(window.exit_code, 0) << window.output;
  const json j = json::parse(window.output.substr(window.output.find('{')));
  EXPECT_EQ(j["timing"], "window");
  EXPECT_FALSE(j.contains("median_step_ms")) << j.dump();
  EXPECT_FALSE(j.contains("p95_step_ms")) << j.dump();
  EXPECT_TRUE(j["step_seconds"].empty());
  const double window_seconds = j["window_seconds"].get<double>();
  EXPECT_GT(window_seconds, 0);
  EXPECT_NEAR(j["mean_step_ms"].get<double>(), window_seconds * 1e3 / 3, 1e-3 * j["mean_step_ms"].get<double>());
  EXPECT_NEAR(j["images_per_second"].get<double>(), 2 * 3 / window_seconds,
              1e-3 * j["images_per_second"].get<double>());
  auto bad = run_shoplens(base + " --timing burst");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--timing"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace shoplens
