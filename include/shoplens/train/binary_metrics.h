// Ranking metrics of a binary classifier from its scores (the text workload's validation: ROC AUC
// is the metric to keep within 1 point of the single-GPU baseline).
//
// Definitions (scikit-learn's, so numbers compare with a Python reference):
//   roc_auc   = P(score of a random positive > score of a random negative), ties counting 1/2
//               (Mann-Whitney U / (P*N)); equal to roc_auc_score, the trapezoid under the ROC
//               curve with tied scores forming one point. NaN unless both classes are present.
//   pr_auc    = average precision, average_precision_score: walking the distinct scores from the
//               highest, sum over thresholds t of (R_t - R_{t-1}) * P_t, with tied scores one
//               threshold (no interpolation). NaN without positives.
//   f1, precision, recall at `threshold`: a sample is predicted positive when score >= threshold;
//               zero_division = 0 (precision 0 with nothing predicted, recall 0 without positives).
//   best_f1 / best_threshold: the F1 maximum over the thresholds "score >= s" for every observed
//               score s; on ties the highest such s. Without positives best_f1 = 0 and
//               best_threshold stays 0.5.
// O(n log n) (one sort); the counts are exact integers, so the AUC has no rounding beyond the
// final division.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace shoplens {

struct BinaryMetrics {
  std::int64_t samples = 0, positives = 0;
  double roc_auc = std::numeric_limits<double>::quiet_NaN();
  double pr_auc = std::numeric_limits<double>::quiet_NaN();
  double threshold = 0.5;
  double f1 = 0, precision = 0, recall = 0;
  double best_f1 = 0, best_threshold = 0.5;
};

// scores: any real numbers (probabilities or logits; only their order and `threshold` matter),
// +-inf allowed. labels: 0 or 1. DataError on a size mismatch, a label outside {0, 1} or a NaN
// score (naming the index). An empty input gives samples 0 and NaN AUCs.
BinaryMetrics binary_metrics(const std::vector<double>& scores, const std::vector<int>& labels, double threshold = 0.5);

// JSON object with the struct's field names; a non-finite value (an undefined AUC, an infinite
// best_threshold) is written as null, which JSON can carry.
nlohmann::json binary_metrics_to_json(const BinaryMetrics& metrics);

}  // namespace shoplens
