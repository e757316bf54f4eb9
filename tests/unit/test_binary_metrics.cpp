#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <limits>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "shoplens/core/errors.h"
#include "shoplens/train/binary_metrics.h"
#include "test_util.h"

namespace shoplens {
namespace {

// scores {0.1, 0.4, 0.35, 0.8}, labels {0, 0, 1, 1}.
// ROC AUC: pairs (positive, negative): 0.35 vs 0.1 win, 0.35 vs 0.4 loss, 0.8 vs both win
//   -> 3 of 4 = 0.75.
// AP, thresholds from the top: 0.8 (tp 1, fp 0): R 1/2, P 1 -> 1/2 * 1
//                              0.4 (tp 1, fp 1): R unchanged -> 0
//                              0.35 (tp 2, fp 1): R 1, P 2/3 -> 1/2 * 2/3
//                              0.1 (tp 2, fp 2): R unchanged -> 0     AP = 1/2 + 1/3 = 5/6.
// At threshold 0.5 only 0.8 is predicted positive: tp 1, fp 0, fn 1 -> P 1, R 1/2, F1 2/3.
// F1 = 2tp / (tp + fp + P) per threshold: 0.8 -> 2/3, 0.4 -> 2/4, 0.35 -> 4/5, 0.1 -> 4/6:
//   best 0.8 at 0.35.
TEST(BinaryMetrics, HandComputedExample) {
  BinaryMetrics m = binary_metrics({0.1, 0.4, 0.35, 0.8}, {0, 0, 1, 1}, 0.5);
  EXPECT_EQ(m.samples, 4);
  EXPECT_EQ(m.positives, 2);
  EXPECT_DOUBLE_EQ(m.roc_auc, 0.75);
  EXPECT_DOUBLE_EQ(m.pr_auc, 5.0 / 6.0);
  EXPECT_EQ(m.threshold, 0.5);
  EXPECT_DOUBLE_EQ(m.precision, 1.0);
  EXPECT_DOUBLE_EQ(m.recall, 0.5);
  EXPECT_DOUBLE_EQ(m.f1, 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(m.best_f1, 0.8);
  EXPECT_EQ(m.best_threshold, 0.35);
}

// scores {0.5, 0.5, 0.5, 0.9, 0.1}, labels {1, 0, 0, 1, 0}: P = 2, N = 3.
// ROC AUC: positive 0.9 beats all three negatives (3); positive 0.5 beats 0.1 (1) and ties the
//   two negatives at 0.5 (2 x 1/2) -> 5 of 6.
// AP: 0.9 (tp 1, fp 0): R 1/2, P 1 -> 1/2; 0.5 group (tp 2, fp 2): R 1, P 1/2 -> 1/4;
//   0.1: R unchanged -> AP 3/4. (Splitting the tied group would give a different number.)
// threshold 0.5 (>=): the four top samples are positive: tp 2, fp 2 -> P 1/2, R 1, F1 2/3.
// best F1: 0.9 -> 2/(1+0+2) = 2/3, 0.5 -> 4/(2+2+2) = 2/3, 0.1 -> 4/7: the tie goes to 0.9.
TEST(BinaryMetrics, TiedScoresCountHalfAndFormOneThreshold) {
  BinaryMetrics m = binary_metrics({0.5, 0.5, 0.5, 0.9, 0.1}, {1, 0, 0, 1, 0}, 0.5);
  EXPECT_DOUBLE_EQ(m.roc_auc, 5.0 / 6.0);
  EXPECT_DOUBLE_EQ(m.pr_auc, 0.75);
  EXPECT_DOUBLE_EQ(m.precision, 0.5);
  EXPECT_DOUBLE_EQ(m.recall, 1.0);
  EXPECT_DOUBLE_EQ(m.f1, 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(m.best_f1, 2.0 / 3.0);
  EXPECT_EQ(m.best_threshold, 0.9);
}

TEST(BinaryMetrics, AllScoresTiedIsChance) {
  // Every pair ties: AUC 1/2; one threshold with precision = prevalence, recall 1.
  BinaryMetrics m = binary_metrics({0.3, 0.3, 0.3, 0.3, 0.3}, {1, 0, 0, 0, 1}, 0.5);
  EXPECT_DOUBLE_EQ(m.roc_auc, 0.5);
  EXPECT_DOUBLE_EQ(m.pr_auc, 0.4);
  EXPECT_EQ(m.f1, 0.0);  // nothing reaches 0.5
  EXPECT_DOUBLE_EQ(m.best_f1, 2.0 * 2 / (5 + 2));
  EXPECT_EQ(m.best_threshold, 0.3);
}

TEST(BinaryMetrics, PerfectAndInvertedRankings) {
  const std::vector<int> labels = {0, 0, 0, 1, 1};
  BinaryMetrics perfect = binary_metrics({0.1, 0.2, 0.3, 0.7, 0.9}, labels, 0.5);
  EXPECT_DOUBLE_EQ(perfect.roc_auc, 1.0);
  EXPECT_DOUBLE_EQ(perfect.pr_auc, 1.0);
  EXPECT_DOUBLE_EQ(perfect.f1, 1.0);
  EXPECT_DOUBLE_EQ(perfect.best_f1, 1.0);
  EXPECT_EQ(perfect.best_threshold, 0.7);

  BinaryMetrics inverted = binary_metrics({0.9, 0.7, 0.6, 0.2, 0.1}, labels, 0.5);
  EXPECT_DOUBLE_EQ(inverted.roc_auc, 0.0);
  // Positives come last: thresholds 0.2 (tp 1 of 4 predicted) and 0.1 (tp 2 of 5):
  // AP = 1/2 * 1/4 + 1/2 * 2/5 = 0.325.
  EXPECT_DOUBLE_EQ(inverted.pr_auc, 0.325);
  EXPECT_EQ(inverted.f1, 0.0);
  EXPECT_EQ(inverted.precision, 0.0);
}

TEST(BinaryMetrics, OneClassOnlyGivesNaN) {
  BinaryMetrics negatives = binary_metrics({0.1, 0.7, 0.4}, {0, 0, 0}, 0.5);
  EXPECT_TRUE(std::isnan(negatives.roc_auc));
  EXPECT_TRUE(std::isnan(negatives.pr_auc));  // no positives: AP undefined
  EXPECT_EQ(negatives.positives, 0);
  EXPECT_EQ(negatives.recall, 0.0);
  EXPECT_EQ(negatives.precision, 0.0);  // 0.7 predicted positive, wrongly
  EXPECT_EQ(negatives.best_f1, 0.0);
  EXPECT_EQ(negatives.best_threshold, 0.5);

  BinaryMetrics positives = binary_metrics({0.1, 0.7, 0.4}, {1, 1, 1}, 0.5);
  EXPECT_TRUE(std::isnan(positives.roc_auc));
  EXPECT_DOUBLE_EQ(positives.pr_auc, 1.0);  // every threshold has precision 1
  EXPECT_DOUBLE_EQ(positives.recall, 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(positives.best_f1, 1.0);
  EXPECT_EQ(positives.best_threshold, 0.1);

  BinaryMetrics empty = binary_metrics({}, {}, 0.5);
  EXPECT_EQ(empty.samples, 0);
  EXPECT_TRUE(std::isnan(empty.roc_auc));
  EXPECT_TRUE(std::isnan(empty.pr_auc));
}

TEST(BinaryMetrics, ThresholdIsInclusive) {
  BinaryMetrics m = binary_metrics({0.2, 0.6, 0.6}, {0, 1, 0}, 0.6);
  EXPECT_DOUBLE_EQ(m.precision, 0.5);
  EXPECT_DOUBLE_EQ(m.recall, 1.0);
  EXPECT_DOUBLE_EQ(m.f1, 2.0 / 3.0);
  EXPECT_EQ(m.threshold, 0.6);
  // Logits work as well as probabilities: only the order and the threshold matter.
  BinaryMetrics logits = binary_metrics({-3.0, 2.0, -0.5, 7.0}, {0, 1, 0, 1}, 0.0);
  EXPECT_DOUBLE_EQ(logits.roc_auc, 1.0);
  EXPECT_DOUBLE_EQ(logits.f1, 1.0);
}

TEST(BinaryMetrics, InvariantToMonotoneTransformOfScores) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::vector<double> scores;
  std::vector<int> labels;
  for (int i = 0; i < 500; ++i) {
    labels.push_back(uniform(rng) < 0.18 ? 1 : 0);
    // Rounded to create ties, shifted up for positives so the AUC is far from 1/2.
    scores.push_back(std::round((uniform(rng) + 0.3 * labels.back()) * 20) / 20);
  }
  std::vector<double> transformed;
  for (double s : scores) transformed.push_back(std::exp(3 * s) - 10);  // strictly increasing
  BinaryMetrics a = binary_metrics(scores, labels, 0.5);
  BinaryMetrics b = binary_metrics(transformed, labels, std::exp(3 * 0.5) - 10);
  EXPECT_GT(a.roc_auc, 0.6);
  EXPECT_DOUBLE_EQ(a.roc_auc, b.roc_auc);
  EXPECT_DOUBLE_EQ(a.pr_auc, b.pr_auc);
  EXPECT_DOUBLE_EQ(a.f1, b.f1);
  EXPECT_DOUBLE_EQ(a.best_f1, b.best_f1);
  EXPECT_DOUBLE_EQ(std::exp(3 * a.best_threshold) - 10, b.best_threshold);
  // ... and to the order of the samples.
  std::vector<std::size_t> perm(scores.size());
  for (std::size_t i = 0; i < perm.size(); ++i) perm[i] = (i * 37) % perm.size();  // 37 coprime to 500
  std::vector<double> s2;
  std::vector<int> l2;
  for (auto i : perm) {
    s2.push_back(scores[i]);
    l2.push_back(labels[i]);
  }
  BinaryMetrics c = binary_metrics(s2, l2, 0.5);
  EXPECT_DOUBLE_EQ(a.roc_auc, c.roc_auc);
  EXPECT_DOUBLE_EQ(a.pr_auc, c.pr_auc);
  EXPECT_EQ(a.best_threshold, c.best_threshold);
}

TEST(BinaryMetrics, AucMatchesBruteForcePairCount) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> level(0, 9);  // many ties
  std::vector<double> scores;
  std::vector<int> labels;
  for (int i = 0; i < 300; ++i) {
    labels.push_back(level(rng) < 3 ? 1 : 0);
    scores.push_back(level(rng) + 2 * labels.back());
  }
  double wins = 0, pairs = 0;
  for (std::size_t i = 0; i < scores.size(); ++i)
    for (std::size_t j = 0; j < scores.size(); ++j)
      if (labels[i] == 1 && labels[j] == 0) {
        pairs += 1;
        wins += scores[i] > scores[j] ? 1.0 : scores[i] == scores[j] ? 0.5 : 0.0;
      }
  EXPECT_NEAR(binary_metrics(scores, labels, 5).roc_auc, wins / pairs, 1e-12);
}

TEST(BinaryMetrics, BadInputIsDataErrorNamingTheIndex) {
  auto message = [](const std::vector<double>& s, const std::vector<int>& l) -> std::string {
    try {
      binary_metrics(s, l, 0.5);
    } catch (const DataError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(message({0.1, 0.2, 0.3}, {0, 2, 1}).find("index 1"), std::string::npos);
  EXPECT_NE(message({0.1, 0.2, 0.3}, {0, 1, -1}).find("index 2"), std::string::npos);
  EXPECT_NE(message({0.1, std::nan(""), 0.3}, {0, 1, 1}).find("index 1"), std::string::npos);
  EXPECT_NE(message({0.1, 0.2}, {0, 1, 1}).find("2 scores for 3 labels"), std::string::npos);
}

TEST(BinaryMetrics, JsonWritesNaNAsNull) {
  nlohmann::json j = binary_metrics_to_json(binary_metrics({0.1, 0.4, 0.35, 0.8}, {0, 0, 1, 1}, 0.5));
  EXPECT_EQ(j["samples"], 4);
  EXPECT_EQ(j["positives"], 2);
  EXPECT_DOUBLE_EQ(j["roc_auc"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(j["pr_auc"].get<double>(), 5.0 / 6.0);
  EXPECT_DOUBLE_EQ(j["best_f1"].get<double>(), 0.8);
  EXPECT_DOUBLE_EQ(j["best_threshold"].get<double>(), 0.35);
  for (const char* key : {"threshold", "f1", "precision", "recall"}) EXPECT_TRUE(j.contains(key)) << key;
  nlohmann::json one_class = binary_metrics_to_json(binary_metrics({0.1, 0.4}, {0, 0}, 0.5));
  EXPECT_TRUE(one_class["roc_auc"].is_null());
  EXPECT_TRUE(one_class["pr_auc"].is_null());
  EXPECT_NO_THROW(one_class.dump());
}

TEST(BinaryMetrics, InfiniteScoresRankAtTheEnds) {
  const double inf = std::numeric_limits<double>::infinity();
  BinaryMetrics m = binary_metrics({-inf, 0.2, inf, 0.9}, {0, 0, 1, 1}, 0.5);
  EXPECT_DOUBLE_EQ(m.roc_auc, 1.0);
  EXPECT_DOUBLE_EQ(m.pr_auc, 1.0);
  EXPECT_DOUBLE_EQ(m.best_f1, 1.0);
  EXPECT_EQ(m.best_threshold, 0.9);
  BinaryMetrics top = binary_metrics({inf, 0.1}, {1, 0}, 0.5);
  EXPECT_EQ(top.best_threshold, inf);
  EXPECT_TRUE(binary_metrics_to_json(top)["best_threshold"].is_null());
}

// The same random data through scikit-learn's roc_auc_score and average_precision_score.
TEST(BinaryMetrics, MatchesScikitLearn) {
  if (::access(testing::python().c_str(), X_OK) != 0) GTEST_SKIP() << testing::python() << " not found";
  auto probe = testing::run_shell(testing::python() + " -c 'import sklearn' 2>&1");
  if (probe.exit_code != 0) GTEST_SKIP() << "scikit-learn is not installed: " << probe.output;

  testing::ScratchDir dir("binmetrics");
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::vector<double> scores;
  std::vector<int> labels;
  std::ostringstream data;
  data.precision(17);
  for (int i = 0; i < 2000; ++i) {
    labels.push_back(uniform(rng) < 0.18 ? 1 : 0);
    double s = uniform(rng) + 0.4 * labels.back();
    if (i % 3 == 0) s = std::round(s * 10) / 10;  // a third of the scores tied on a coarse grid
    scores.push_back(s);
    data << s << "," << labels.back() << "\n";
  }
  testing::write_text(dir / "data.csv", data.str());
  testing::write_text(
      dir / "check.py",
      "import sys\n"
      "from sklearn.metrics import roc_auc_score, average_precision_score, f1_score\n"
      "s, y = [], []\n"
      "for line in open(sys.argv[1]):\n"
      "    a, b = line.strip().split(',')\n"
      "    s.append(float(a)); y.append(int(b))\n"
      "pred = [1 if x >= 0.5 else 0 for x in s]\n"
      "# float(): numpy 2 writes np.float64(...) for its scalars' repr\n"
      "print(*(repr(float(v)) for v in (roc_auc_score(y, s), average_precision_score(y, s), f1_score(y, pred))))\n");
  auto run = testing::run_shell(testing::python() + " " + (dir / "check.py").string() + " " +
                                (dir / "data.csv").string() + " 2>&1");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::istringstream in(run.output);
  double auc = 0, ap = 0, f1 = 0;
  in >> auc >> ap >> f1;
  ASSERT_FALSE(in.fail()) << run.output;
  BinaryMetrics m = binary_metrics(scores, labels, 0.5);
  EXPECT_NEAR(m.roc_auc, auc, 1e-12);
  EXPECT_NEAR(m.pr_auc, ap, 1e-12);
  EXPECT_NEAR(m.f1, f1, 1e-12);
}

}  // namespace
}  // namespace shoplens
