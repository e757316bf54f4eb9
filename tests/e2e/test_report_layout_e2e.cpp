// Every HTML report the product writes, rendered in headless Chromium at 1280 px and at 800 px
// from inputs as large as users' (12 classes with long names and counts in the thousands; a study
// of three seeds): the page fits its window without horizontal scroll, colours have a legend,
// text is readable, every seed's series is drawn per epoch on integer epoch ticks, and no point
// sits on an axis. A screenshot of each stays in testing::test_output_dir()/screenshots for CI.
// An e2e suite because it runs a real browser (seconds per page); the pages come from the same
// library functions `evaluate` and `bench --study batch` call.
#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <string>
#include <vector>

#include "scratch_suite.h"
#include "shoplens/bench/batch_study.h"
#include "shoplens/data/synth_catalog.h"
#include "shoplens/infer/evaluation.h"
#include "test_util.h"

namespace shoplens {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

class E2eReportLayout : public testing::ScratchSuite<E2eReportLayout> {
 protected:
  // The check at both widths; the 1280 px one keeps a screenshot named `name`.
  static json check_at_both_widths(const fs::path& page, const std::string& name) {
    const json wide = testing::check_page_in_browser(page, {1280, name});
    EXPECT_TRUE(wide["problems"].empty()) << wide.dump(2);
    EXPECT_TRUE(wide["console"].empty()) << wide.dump(2);
    EXPECT_EQ(wide["page"]["scroll_width"], wide["page"]["viewport_width"]) << wide["page"].dump();
    EXPECT_TRUE(fs::exists(wide.value("screenshot", ""))) << wide.dump(2);
    const json narrow = testing::check_page_in_browser(page, {800, ""});
    EXPECT_TRUE(narrow["problems"].empty()) << narrow.dump(2);
    return wide;
  }
};

// The synthetic catalogue's 12 classes (the longest is 21 characters), 1,000 to 3,000 rows each,
// most predicted right and the rest spread over the other classes.
json twelve_class_metrics() {
  std::vector<std::string> names;
  for (const auto& c : synth_classes()) names.push_back(c.name);
  EvaluationAccumulator acc(names);
  const int n = static_cast<int>(names.size());
  for (int t = 0; t < n; ++t)
    for (int row = 0; row < 1000 + 180 * t; ++row) {
      const int predicted = row % 5 == 0 ? (t + 1 + row % (n - 1)) % n : t;
      std::vector<float> p(n, 0.2f / static_cast<float>(n - 1));
      p[predicted] = 0.5f + 0.3f * static_cast<float>(row % 7) / 6.0f;
      acc.add(names[t], p);
    }
  return acc.to_json();
}

TEST_F(E2eReportLayout, TheEvaluationReportOfTwelveClassesFitsAndKeysItsColours) {
  const fs::path page = scratch() / "evaluation.html";
  testing::write_text(page, evaluation_report_html(twelve_class_metrics(), "Evaluation of a 12-class model"));
  const json wide = check_at_both_widths(page, "evaluation-report-12-classes");
  ASSERT_EQ(wide["charts"], 1) << wide.dump(2);
  EXPECT_GE(wide["chart_details"][0]["x_ticks"].size(), 3u) << wide.dump(2);
}

// A run of `epochs` epochs as the study reads it back: a train record every third of an epoch,
// a validation record at the end of each epoch.
StudyRun study_run(const std::string& label, std::int64_t seed, int batch, int epochs) {
  StudyRun r;
  r.label = label;
  r.seed = seed;
  r.micro_batch = batch;
  r.lr = 0.01 * batch / 4;
  r.summary = {{"images_per_second", 40.0 * std::sqrt(batch)},
               {"train_seconds", 30.0 / std::sqrt(batch)},
               {"steps", 400 / batch},
               {"model", "small_cnn"},
               {"precision", "fp32"},
               {"threads", 1},
               {"accumulation_steps", 1},
               {"epochs", epochs},
               {"peak_rss_bytes", 300.0 * 1048576}};
  for (int e = 1; e <= epochs; ++e) {
    for (int third = 1; third <= 3; ++third)
      r.train_loss.emplace_back(e - 1 + third / 3.0, 2.0 / (e + third / 3.0) + 0.01 * static_cast<double>(seed));
    r.val_f1.emplace_back(e, 0.3 + 0.1 * e + 0.005 * static_cast<double>(seed));
    r.val_loss.emplace_back(e, 1.8 / e + 0.01 * static_cast<double>(seed));
    r.val_seconds.push_back(10.0 * e);
  }
  r.final_val_f1 = r.val_f1.back().second;
  return r;
}

const json* chart_named(const json& check, const std::string& words) {
  for (const auto& chart : check["chart_details"])
    if (chart["name"].get<std::string>().find(words) != std::string::npos) return &chart;
  return nullptr;
}

TEST_F(E2eReportLayout, TheStudyReportDrawsEverySeedPerEpochOnIntegerTicks) {
  const int epochs = 2;
  const std::vector<std::int64_t> seeds{7, 8, 9};
  std::vector<StudyRun> base, cand;
  for (auto seed : seeds) {
    base.push_back(study_run("baseline", seed, 4, epochs));
    cand.push_back(study_run("find_batch", seed, 16, epochs));
  }
  const json find_batch = {{"lr_scaling", "sqrt"},
                           {"search",
                            {{"probes",
                              {{{"ok", true}, {"batch", 4}, {"images_per_second", 80.0}, {"peak_bytes", 9e6}},
                               {{"ok", true}, {"batch", 16}, {"images_per_second", 160.0}, {"peak_bytes", 3e7}}}},
                             {"fit", {{"static_bytes", 2e6}, {"bytes_per_sample", 1.75e6}}}}}};
  BatchStudyOptions options;
  options.shards = "/data/shards";
  options.epochs = epochs;
  options.seeds = static_cast<int>(seeds.size());
  const fs::path page = scratch() / "study.html";
  testing::write_text(page, batch_study_html(base, cand, find_batch, options));
  const json wide = check_at_both_widths(page, "study-report-3-seeds");
  const std::regex integer("-?[0-9]+");
  for (const char* words : {"loss", "macro-F1"}) {
    const json* chart = chart_named(wide, words);
    ASSERT_NE(chart, nullptr) << words << wide.dump(2);
    for (const auto& tick : (*chart)["x_ticks"])
      EXPECT_TRUE(std::regex_match(tick.get<std::string>(), integer)) << words << ": epoch tick " << tick;
    for (auto seed : seeds)
      for (const std::string arm : {"baseline", "find-batch"}) {
        int drawn = -1;  // the series of this arm and seed: one point per epoch
        for (const auto& s : (*chart)["series"]) {
          const auto name = s["name"].get<std::string>();
          if (name.find(arm) == 0 && name.find("seed " + std::to_string(seed)) != std::string::npos)
            drawn = s["points"].get<int>();
        }
        EXPECT_EQ(drawn, epochs) << words << ": " << arm << " seed " << seed << "\n" << chart->dump(2);
      }
  }
}

}  // namespace
}  // namespace shoplens
