#include "shoplens/bench/bench_stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "shoplens/core/stats.h"

namespace shoplens {
namespace {

double sum_of(const std::vector<double>& counts, std::size_t from, std::size_t to) {
  double s = 0;
  for (std::size_t t = from; t <= to && t < counts.size(); ++t) s += counts[t];
  return s;
}

// P(T <= t) and P(T >= t) of the distribution `counts` at the observed value t.
void tails(const std::vector<double>& counts, int t, double& p_le, double& p_ge) {
  const double total = sum_of(counts, 0, counts.size());
  const auto at = static_cast<std::size_t>(std::max(t, 0));
  p_le = sum_of(counts, 0, at) / total;
  p_ge = sum_of(counts, at, counts.size()) / total;
}

// The interval [sorted[k-1], sorted[size-k]] of the sorted Walsh averages or differences.
void set_interval(ShiftEstimate& e, std::vector<double> sorted, const std::vector<double>& null_counts) {
  std::sort(sorted.begin(), sorted.end());
  e.estimate = percentile(sorted, 0.5);
  const int k = interval_rank(null_counts, e.confidence);
  if (k < 1 || static_cast<std::size_t>(k) > sorted.size()) return;
  e.low = sorted[static_cast<std::size_t>(k - 1)];
  e.high = sorted[sorted.size() - static_cast<std::size_t>(k)];
}

std::vector<int> plain_doubled_ranks(std::size_t n) {
  std::vector<int> r(n);
  for (std::size_t i = 0; i < n; ++i) r[i] = 2 * static_cast<int>(i + 1);
  return r;
}

// The doubled-rank distributions count T in steps of 2 for untied ranks; the interval's rank k
// counts Walsh averages (or differences), one per unit of T.
std::vector<double> halve(const std::vector<double>& doubled) {
  std::vector<double> out(doubled.size() / 2 + 1, 0.0);
  for (std::size_t t = 0; t < doubled.size(); t += 2) out[t / 2] = doubled[t];
  return out;
}

}  // namespace

std::vector<int> doubled_midranks(const std::vector<double>& values) {
  std::vector<std::size_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return values[a] < values[b]; });
  std::vector<int> ranks(values.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j + 1 < order.size() && values[order[j + 1]] == values[order[i]]) ++j;
    const auto doubled = static_cast<int>(i + 1 + j + 1);  // (first + last rank), i.e. twice their mean
    for (std::size_t k = i; k <= j; ++k) ranks[order[k]] = doubled;
    i = j + 1;
  }
  return ranks;
}

std::vector<double> signed_rank_counts(const std::vector<int>& doubled_ranks) {
  const int total = std::accumulate(doubled_ranks.begin(), doubled_ranks.end(), 0);
  std::vector<double> counts(static_cast<std::size_t>(total) + 1, 0.0);
  counts[0] = 1;
  std::size_t reach = 0;
  for (int rank : doubled_ranks) {
    const auto r = static_cast<std::size_t>(rank);
    for (std::size_t t = reach + 1; t-- > 0;) counts[t + r] += counts[t];
    reach += r;
  }
  return counts;
}

std::vector<double> rank_sum_counts(const std::vector<int>& doubled_ranks, int m) {
  const int total = std::accumulate(doubled_ranks.begin(), doubled_ranks.end(), 0);
  const auto width = static_cast<std::size_t>(total) + 1;
  // f[k][t]: k items chosen so far with doubled rank sum t.
  std::vector<std::vector<double>> f(static_cast<std::size_t>(m) + 1, std::vector<double>(width, 0.0));
  f[0][0] = 1;
  for (int r : doubled_ranks)
    for (int k = m; k >= 1; --k)
      for (std::size_t t = width - 1; t >= static_cast<std::size_t>(r); --t)
        f[static_cast<std::size_t>(k)][t] += f[static_cast<std::size_t>(k - 1)][t - static_cast<std::size_t>(r)];
  return f[static_cast<std::size_t>(m)];
}

int interval_rank(const std::vector<double>& counts, double confidence) {
  const double total = sum_of(counts, 0, counts.size());
  const double tail = (1 - confidence) / 2;
  int k = 0;
  double below = 0;  // P(T <= k - 1)
  for (std::size_t t = 0; t < counts.size(); ++t) {
    below += counts[t] / total;
    if (below > tail * (1 + 1e-12)) break;
    k = static_cast<int>(t) + 1;
  }
  return k;
}

ShiftEstimate paired_shift(const std::vector<double>& d, double confidence) {
  ShiftEstimate e;
  e.test = "Wilcoxon signed-rank";
  e.confidence = confidence;
  std::vector<double> nonzero, magnitude;
  for (double x : d)
    if (x != 0 && std::isfinite(x)) nonzero.push_back(x);
  e.n = static_cast<int>(nonzero.size());
  if (nonzero.empty()) return e;
  for (double x : nonzero) magnitude.push_back(std::fabs(x));
  const auto ranks = doubled_midranks(magnitude);
  int t_plus = 0;
  for (std::size_t i = 0; i < nonzero.size(); ++i)
    if (nonzero[i] > 0) t_plus += ranks[i];
  tails(signed_rank_counts(ranks), t_plus, e.p_lower, e.p_higher);
  std::vector<double> walsh;
  for (std::size_t i = 0; i < nonzero.size(); ++i)
    for (std::size_t j = i; j < nonzero.size(); ++j) walsh.push_back((nonzero[i] + nonzero[j]) / 2);
  set_interval(e, walsh, halve(signed_rank_counts(plain_doubled_ranks(nonzero.size()))));
  return e;
}

ShiftEstimate two_sample_shift(const std::vector<double>& x, const std::vector<double>& y, double confidence) {
  ShiftEstimate e;
  e.test = "Mann-Whitney";
  e.confidence = confidence;
  e.n = static_cast<int>(std::min(x.size(), y.size()));
  if (x.empty() || y.empty()) {
    e.n = 0;
    return e;
  }
  std::vector<double> pooled(x);
  pooled.insert(pooled.end(), y.begin(), y.end());
  const auto ranks = doubled_midranks(pooled);
  const int m = static_cast<int>(x.size());
  const int w = std::accumulate(ranks.begin(), ranks.begin() + m, 0);
  tails(rank_sum_counts(ranks, m), w, e.p_lower, e.p_higher);
  std::vector<double> differences;
  for (double a : x)
    for (double b : y) differences.push_back(a - b);
  // U = W - m(m+1)/2 counts the differences above 0; its null distribution is W's, shifted.
  const auto w_counts = halve(rank_sum_counts(plain_doubled_ranks(pooled.size()), m));
  const auto offset = static_cast<std::size_t>(m * (m + 1) / 2);
  set_interval(e, differences,
               std::vector<double>(w_counts.begin() + static_cast<std::ptrdiff_t>(offset), w_counts.end()));
  return e;
}

}  // namespace shoplens
