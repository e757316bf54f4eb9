#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>

#include <nlohmann/json.hpp>

#include "shoplens/core/errors.h"
#include "shoplens/train/binary_metrics.h"
#include "shoplens/train/metrics.h"

namespace shoplens {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// Fills a matrix from (true, predicted, count) triples.
ConfusionMatrix matrix_of(int num_classes, const std::vector<std::array<int, 3>>& cells) {
  ConfusionMatrix m(num_classes);
  for (const auto& [t, p, n] : cells)
    for (int i = 0; i < n; ++i) m.add(t, p);
  return m;
}

// Three classes; class 1 occurs in the labels but is never predicted, class 2 is predicted but
// never occurs in the labels.
//   true\pred   0  1  2        support  predicted  tp
//      0        3  0  1           4         5       3
//      1        2  0  1           3         0       0
//      2        0  0  0           0         2       0
// precision: 3/5, 0 (never predicted: zero_division), 0/2
// recall:    3/4, 0/3, 0 (no support: zero_division)
// f1:        2*3/(4+5) = 2/3, 0, 0
// macro over the 3 present classes: P = 0.6/3 = 0.2, R = 0.75/3 = 0.25, F1 = (2/3)/3 = 2/9
// weighted F1 = (2/3*4 + 0*3 + 0*0)/7 = 8/21; accuracy = 3/7
ConfusionMatrix hand_example(int num_classes = 3) {
  return matrix_of(num_classes, {{0, 0, 3}, {0, 2, 1}, {1, 0, 2}, {1, 2, 1}});
}

TEST(Metrics, ConfusionMatrixCountsRowTrueColumnPredicted) {
  ConfusionMatrix m = hand_example();
  EXPECT_EQ(m.total(), 7);
  EXPECT_EQ(m.num_classes(), 3);
  EXPECT_EQ(m.counts(), (std::vector<std::int64_t>{3, 0, 1, 2, 0, 1, 0, 0, 0}));
  EXPECT_EQ(m.at(1, 0), 2);
}

TEST(Metrics, HandComputedReportWithUnpredictedAndUnlabelledClasses) {
  ClassificationReport r = classification_report(hand_example());
  EXPECT_EQ(r.samples, 7);
  EXPECT_EQ(r.num_classes, 3);
  ASSERT_EQ(r.per_class.size(), 3u);
  EXPECT_DOUBLE_EQ(r.per_class[0].precision, 0.6);
  EXPECT_DOUBLE_EQ(r.per_class[0].recall, 0.75);
  EXPECT_DOUBLE_EQ(r.per_class[0].f1, 2.0 / 3.0);
  EXPECT_EQ(r.per_class[0].support, 4);
  EXPECT_EQ(r.per_class[0].predicted, 5);
  EXPECT_EQ(r.per_class[1].precision, 0.0);  // never predicted
  EXPECT_EQ(r.per_class[1].recall, 0.0);
  EXPECT_EQ(r.per_class[1].f1, 0.0);
  EXPECT_EQ(r.per_class[1].support, 3);
  EXPECT_EQ(r.per_class[1].predicted, 0);
  EXPECT_EQ(r.per_class[2].precision, 0.0);
  EXPECT_EQ(r.per_class[2].recall, 0.0);  // not in the labels
  EXPECT_EQ(r.per_class[2].support, 0);
  EXPECT_EQ(r.per_class[2].predicted, 2);
  EXPECT_DOUBLE_EQ(r.accuracy, 3.0 / 7.0);
  EXPECT_DOUBLE_EQ(r.macro_precision, 0.2);
  EXPECT_DOUBLE_EQ(r.macro_recall, 0.25);
  EXPECT_DOUBLE_EQ(r.macro_f1, 2.0 / 9.0);
  EXPECT_DOUBLE_EQ(r.weighted_f1, 8.0 / 21.0);
  EXPECT_EQ(r.confusion, hand_example().counts());
}

TEST(Metrics, ClassAbsentFromLabelsAndPredictionsIsLeftOutOfMacroAverages) {
  // The same samples with a fourth class nobody saw: sklearn never hears of it.
  ClassificationReport three = classification_report(hand_example(3));
  ClassificationReport four = classification_report(hand_example(4));
  EXPECT_DOUBLE_EQ(four.macro_precision, three.macro_precision);
  EXPECT_DOUBLE_EQ(four.macro_recall, three.macro_recall);
  EXPECT_DOUBLE_EQ(four.macro_f1, three.macro_f1);
  EXPECT_DOUBLE_EQ(four.weighted_f1, three.weighted_f1);
  EXPECT_DOUBLE_EQ(four.accuracy, three.accuracy);
  ASSERT_EQ(four.per_class.size(), 4u);
  EXPECT_EQ(four.per_class[3].support, 0);
  EXPECT_EQ(four.per_class[3].predicted, 0);
}

TEST(Metrics, HandComputedReportAllClassesPresent) {
  //   true\pred  0  1  2    support 3, 4, 4; predicted 3, 3, 5; tp 2, 2, 3
  //      0       2  1  0    precision 2/3, 2/3, 3/5
  //      1       0  2  2    recall    2/3, 1/2, 3/4
  //      2       1  0  3    f1        4/6, 4/7, 6/9
  ClassificationReport r =
      classification_report(matrix_of(3, {{0, 0, 2}, {0, 1, 1}, {1, 1, 2}, {1, 2, 2}, {2, 0, 1}, {2, 2, 3}}));
  EXPECT_EQ(r.samples, 11);
  EXPECT_DOUBLE_EQ(r.per_class[1].precision, 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(r.per_class[1].recall, 0.5);
  EXPECT_DOUBLE_EQ(r.per_class[1].f1, 4.0 / 7.0);
  EXPECT_DOUBLE_EQ(r.per_class[2].precision, 0.6);
  EXPECT_DOUBLE_EQ(r.per_class[2].f1, 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(r.accuracy, 7.0 / 11.0);
  EXPECT_DOUBLE_EQ(r.macro_precision, 29.0 / 45.0);
  EXPECT_DOUBLE_EQ(r.macro_recall, 23.0 / 36.0);
  EXPECT_DOUBLE_EQ(r.macro_f1, 40.0 / 63.0);
  EXPECT_DOUBLE_EQ(r.weighted_f1, 146.0 / 231.0);
}

TEST(Metrics, EmptyMatrixReportsZerosNotNan) {
  ClassificationReport r = classification_report(ConfusionMatrix(3));
  EXPECT_EQ(r.samples, 0);
  EXPECT_EQ(r.accuracy, 0.0);
  EXPECT_EQ(r.macro_f1, 0.0);
  EXPECT_EQ(r.weighted_f1, 0.0);
  EXPECT_EQ(r.macro_precision, 0.0);
}

TEST(Metrics, AddBatchAndMergeMatchSingleAdds) {
  const std::vector<std::int64_t> labels{0, 0, 0, 0, 1, 1, 1}, predicted{0, 2, 0, 0, 0, 2, 0};
  ConfusionMatrix a(3), b(3);
  a.add_batch(labels.data(), predicted.data(), 4);
  b.add_batch(labels.data() + 4, predicted.data() + 4, 3);
  a.merge(b);
  EXPECT_EQ(a.counts(), hand_example().counts());
  EXPECT_EQ(a.total(), 7);
  EXPECT_THROW(a.merge(ConfusionMatrix(4)), DataError);
}

TEST(Metrics, OutOfRangeLabelsAreDataErrorsAndLeaveTheMatrixUnchanged) {
  ConfusionMatrix m(3);
  EXPECT_THROW(m.add(3, 0), DataError);
  EXPECT_THROW(m.add(-1, 0), DataError);
  EXPECT_THROW(m.add(0, 3), DataError);
  EXPECT_THROW(m.add(0, -2), DataError);
  const std::vector<std::int64_t> labels{0, 1, 7}, predicted{0, 1, 1};
  EXPECT_THAT([&] { m.add_batch(labels.data(), predicted.data(), labels.size()); },
              ThrowsMessage<DataError>(HasSubstr("label 7")));
  EXPECT_EQ(m.total(), 0);
  EXPECT_EQ(m.counts(), std::vector<std::int64_t>(9, 0));
  EXPECT_THROW(ConfusionMatrix(0), DataError);
}

TEST(Metrics, ReportToJson) {
  auto j = report_to_json(classification_report(hand_example()), {"blurry", "good", "dark"});
  EXPECT_EQ(j["samples"], 7);
  EXPECT_DOUBLE_EQ(j["macro_f1"].get<double>(), 2.0 / 9.0);
  EXPECT_EQ(j["classes"], (std::vector<std::string>{"blurry", "good", "dark"}));
  ASSERT_EQ(j["per_class"].size(), 3u);
  EXPECT_EQ(j["per_class"][0]["name"], "blurry");
  EXPECT_DOUBLE_EQ(j["per_class"][0]["precision"].get<double>(), 0.6);
  EXPECT_EQ(j["per_class"][2]["predicted"], 2);
  EXPECT_EQ(j["confusion"], nlohmann::json::parse("[[3,0,1],[2,0,1],[0,0,0]]"));
  // No names: the class indices.
  EXPECT_EQ(report_to_json(classification_report(hand_example()), {})["classes"],
            (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_THROW(report_to_json(classification_report(hand_example()), {"a", "b"}), DataError);
}

TEST(Metrics, ReportToMarkdown) {
  std::string md = report_to_markdown(classification_report(hand_example()), {"blurry", "go|od", "dark"});
  EXPECT_NE(md.find("7 samples, accuracy 0.4286"), std::string::npos) << md;
  EXPECT_NE(md.find("| blurry | 0.6000 | 0.7500 | 0.6667 | 4 | 5 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| go\\|od | 0.0000 | 0.0000 | 0.0000 | 3 | 0 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| **macro average** | 0.2000 | 0.2500 | 0.2222 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| true \\ predicted | blurry | go\\|od | dark |"), std::string::npos) << md;
  EXPECT_NE(md.find("| blurry | 3 | 0 | 1 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| dark | 0 | 0 | 0 |"), std::string::npos) << md;
}

TEST(Metrics, MetricValueAndDirection) {
  ClassificationReport r = classification_report(hand_example());
  EXPECT_EQ(metric_names(), (std::vector<std::string>{"loss", "accuracy", "macro_f1", "weighted_f1", "macro_precision",
                                                      "macro_recall", "roc_auc", "pr_auc"}));
  EXPECT_EQ(metric_value(r, 1.25, "loss"), 1.25);
  EXPECT_DOUBLE_EQ(metric_value(r, 1.25, "accuracy"), 3.0 / 7.0);
  EXPECT_DOUBLE_EQ(metric_value(r, 1.25, "macro_f1"), 2.0 / 9.0);
  EXPECT_DOUBLE_EQ(metric_value(r, 1.25, "weighted_f1"), 8.0 / 21.0);
  EXPECT_DOUBLE_EQ(metric_value(r, 1.25, "macro_precision"), 0.2);
  EXPECT_DOUBLE_EQ(metric_value(r, 1.25, "macro_recall"), 0.25);
  // The ranking metrics need a two-class task's scores: without them it is a config error.
  EXPECT_THROW(metric_value(r, 1.25, "roc_auc"), ConfigError);
  BinaryMetrics binary;
  binary.roc_auc = 0.8;
  binary.pr_auc = 0.4;
  EXPECT_EQ(metric_value(r, 1.25, "roc_auc", &binary), 0.8);
  EXPECT_EQ(metric_value(r, 1.25, "pr_auc", &binary), 0.4);
  EXPECT_FALSE(metric_higher_is_better("loss"));
  for (const auto& name : metric_names()) EXPECT_EQ(metric_higher_is_better(name), name != "loss") << name;
}

TEST(Metrics, UnknownMetricNameIsConfigErrorWithNearestName) {
  ClassificationReport r = classification_report(hand_example());
  EXPECT_THAT([&] { metric_value(r, 0, "macro-f1"); },
              ThrowsMessage<ConfigError>(HasSubstr("did you mean 'macro_f1'")));
  EXPECT_THROW(metric_higher_is_better("f2"), ConfigError);
}

}  // namespace
}  // namespace shoplens
