// EvaluationAccumulator: the numbers `evaluate` and a labelled `score` report, on rows small
// enough to check by hand, and the rows that cannot count.
#include <cmath>

#include <gtest/gtest.h>

#include "shoplens/core/errors.h"
#include "shoplens/infer/evaluation.h"
#include "test_util.h"

namespace shoplens {
namespace {

const std::vector<std::string> kClasses{"cat", "dog", "fox"};

TEST(Evaluation, AccuracyTopKConfusionAndEceByHand) {
  EvaluationAccumulator acc(kClasses, 10);
  acc.add("cat", {0.92f, 0.04f, 0.04f});  // right, confidence 0.92
  acc.add("dog", {0.64f, 0.26f, 0.10f});  // wrong (cat), confidence 0.64; dog second
  acc.add("fox", {0.13f, 0.10f, 0.77f});  // right, confidence 0.77
  acc.add("fox", {0.53f, 0.42f, 0.05f});  // wrong (cat), confidence 0.53; fox last of three
  const auto j = acc.to_json();
  EXPECT_EQ(j["samples"], 4);
  EXPECT_DOUBLE_EQ(j["accuracy"].get<double>(), 0.5);
  EXPECT_EQ(j["top_k"], 3);  // k = min(5, classes)
  EXPECT_DOUBLE_EQ(j["top5_accuracy"].get<double>(), 1.0);
  EXPECT_EQ(j["confusion"][0], (std::vector<int>{1, 0, 0}));
  EXPECT_EQ(j["confusion"][1], (std::vector<int>{1, 0, 0}));
  EXPECT_EQ(j["confusion"][2], (std::vector<int>{1, 0, 1}));
  // One row per bin of width 0.1: ECE = (|1-0.92| + |0-0.64| + |1-0.77| + |0-0.53|) / 4 = 0.37.
  EXPECT_NEAR(j["ece"].get<double>(), 0.37, 1e-6);
  const double nll = -(std::log(0.92) + std::log(0.26) + std::log(0.77) + std::log(0.05)) / 4;
  EXPECT_NEAR(j["nll"].get<double>(), nll, 1e-6);
}

// The result is a struct the verbs print from; metrics.json is its to_json, the same numbers.
TEST(Evaluation, TheTypedResultIsWhatItsJsonSays) {
  EvaluationAccumulator acc(kClasses, 10);
  acc.add("cat", {0.92f, 0.04f, 0.04f});
  acc.add("dog", {0.64f, 0.26f, 0.10f});
  acc.add_unreadable("fox");
  Evaluation e = acc.result();
  EXPECT_EQ(e.report.samples, 2);
  EXPECT_DOUBLE_EQ(e.report.accuracy, 0.5);
  EXPECT_EQ(e.top_k, 3);
  EXPECT_EQ(e.rows.unreadable, 1);
  ASSERT_EQ(e.calibration.size(), 10u);
  EXPECT_EQ(e.calibration[9].count, 1);  // the 0.92 row
  const auto j = e.to_json();
  EXPECT_DOUBLE_EQ(j["ece"].get<double>(), e.ece);
  EXPECT_EQ(j["calibration_bins"][9]["count"], 1);
  EXPECT_FALSE(j.contains("model"));  // only a run_evaluate result names its model
  e.model = "m";
  e.input = "in";
  e.images_per_second = 12.5;
  EXPECT_EQ(e.to_json()["images_per_second"], 12.5);
  EXPECT_EQ(e.summary_line(), acc.summary_line());
}

TEST(Evaluation, RowsThatCannotCountAreCountedApart) {
  EvaluationAccumulator acc(kClasses);
  acc.add("cat", {1.0f, 0.0f, 0.0f});
  acc.add("", {1.0f, 0.0f, 0.0f});
  acc.add("wolf", {1.0f, 0.0f, 0.0f});
  acc.add("wolf", {1.0f, 0.0f, 0.0f});
  acc.add_unreadable("dog");
  const auto j = acc.to_json();
  EXPECT_EQ(j["samples"], 1);
  EXPECT_EQ(j["rows"]["unlabelled"], 1);
  EXPECT_EQ(j["rows"]["unknown_label"], 2);
  EXPECT_EQ(j["rows"]["unreadable"], 1);
  EXPECT_EQ(j["unknown_labels"]["wolf"], 2);
  EXPECT_NE(acc.summary_line().find("1 unreadable"), std::string::npos) << acc.summary_line();
}

TEST(Evaluation, RefusesProbabilitiesOfAnotherClassCount) {
  EvaluationAccumulator acc(kClasses);
  EXPECT_THROW(acc.add("cat", {0.5f, 0.5f}), DataError);
  EXPECT_THROW(EvaluationAccumulator({}), DataError);
}

TEST(Evaluation, TheReportPageEscapesNamesAndDrawsEveryCell) {
  EvaluationAccumulator acc({"<script>", "b&b"});
  acc.add("<script>", {0.8f, 0.2f});
  acc.add("b&b", {0.3f, 0.7f});
  const std::string html = evaluation_report_html(acc.to_json(), "run \"x\"");
  EXPECT_EQ(html.find("<script>"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;"), std::string::npos);
  EXPECT_NE(html.find("b&amp;b"), std::string::npos);
  EXPECT_NE(html.find("run &quot;x&quot;"), std::string::npos);
  // 2x2 confusion cells, each with its share in a title.
  EXPECT_EQ(testing::occurrences(html, "of the row"), 4u);
}

}  // namespace
}  // namespace shoplens
