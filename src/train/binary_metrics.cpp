#include "shoplens/train/binary_metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "shoplens/core/errors.h"

namespace shoplens {
namespace {

double ratio(double num, double den) { return den > 0 ? num / den : 0.0; }

nlohmann::json number_or_null(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); }

}  // namespace

BinaryMetrics binary_metrics(const std::vector<double>& scores, const std::vector<int>& labels, double threshold) {
  if (scores.size() != labels.size())
    throw DataError(fmt::format("{} scores for {} labels", scores.size(), labels.size()));
  const std::size_t n = scores.size();
  BinaryMetrics m;
  m.threshold = threshold;
  m.samples = static_cast<std::int64_t>(n);

  std::int64_t tp_at = 0, fp_at = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (labels[i] != 0 && labels[i] != 1)
      throw DataError(fmt::format("label {} at index {} is not 0 or 1", labels[i], i));
    if (std::isnan(scores[i])) throw DataError(fmt::format("score at index {} is NaN", i));
    m.positives += labels[i];
    if (scores[i] >= threshold) (labels[i] ? tp_at : fp_at) += 1;
  }
  const std::int64_t pos = m.positives, neg = m.samples - m.positives;
  m.precision = ratio(static_cast<double>(tp_at), static_cast<double>(tp_at + fp_at));
  m.recall = ratio(static_cast<double>(tp_at), static_cast<double>(pos));
  m.f1 = ratio(2.0 * static_cast<double>(tp_at), static_cast<double>(tp_at + fp_at + pos));
  if (n == 0) return m;

  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return scores[a] > scores[b]; });

  // One ROC/PR point per distinct score, from the highest. twice_area sums the trapezoids times 2
  // in integers: (fp - fp_prev) * (tp + tp_prev) is exactly the Mann-Whitney count with ties 1/2
  // (doubled), and stays below 2*P*N, far inside int64 for any realistic validation set.
  std::int64_t tp = 0, fp = 0, twice_area = 0;
  double ap = 0;
  for (std::size_t i = 0; i < n;) {
    const std::int64_t tp_prev = tp, fp_prev = fp;
    const double s = scores[order[i]];
    for (; i < n && scores[order[i]] == s; ++i) (labels[order[i]] ? tp : fp) += 1;
    twice_area += (fp - fp_prev) * (tp + tp_prev);
    if (pos > 0) {
      ap += static_cast<double>(tp - tp_prev) / static_cast<double>(pos) * static_cast<double>(tp) /
            static_cast<double>(tp + fp);
      const double f1 = 2.0 * static_cast<double>(tp) / static_cast<double>(tp + fp + pos);
      if (f1 > m.best_f1) {
        m.best_f1 = f1;
        m.best_threshold = s;
      }
    }
  }
  if (pos > 0) m.pr_auc = ap;
  if (pos > 0 && neg > 0)
    m.roc_auc = static_cast<double>(twice_area) / (2.0 * static_cast<double>(pos) * static_cast<double>(neg));
  return m;
}

nlohmann::json binary_metrics_to_json(const BinaryMetrics& m) {
  return {{"samples", m.samples},
          {"positives", m.positives},
          {"roc_auc", number_or_null(m.roc_auc)},
          {"pr_auc", number_or_null(m.pr_auc)},
          {"threshold", m.threshold},
          {"f1", m.f1},
          {"precision", m.precision},
          {"recall", m.recall},
          {"best_f1", m.best_f1},
          {"best_threshold", number_or_null(m.best_threshold)}};
}

}  // namespace shoplens
