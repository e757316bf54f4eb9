// Rank statistics for the A/B verdict of `shoplens bench --against` (docs/BENCH.md): the
// Wilcoxon signed-rank test on paired differences, the Mann-Whitney (Wilcoxon rank-sum) test on
// two samples, and the Hodges-Lehmann estimate of the shift with its distribution-free confidence
// interval. Exact permutation distributions (ties by midranks), no normal approximation: the
// samples are benchmark trials, tens at most. Plain C++, unit-tested on known answers.
#pragma once

#include <limits>
#include <string>
#include <vector>

namespace shoplens {

// The shift between two sides and how sure it is. On the A/B verdict's scale (log of the ratio
// candidate / baseline), so exp(estimate) - 1 is the relative change.
struct ShiftEstimate {
  int n = 0;  // pairs (paired), or the smaller sample (two samples); 0: nothing to test
  double estimate = 0;
  double low = -std::numeric_limits<double>::infinity();  // the interval at `confidence`; infinite when
  double high = std::numeric_limits<double>::infinity();  // too few trials for that confidence
  double confidence = 0.95;
  double p_lower = 1;   // one-sided p-value: the shift is below 0
  double p_higher = 1;  // one-sided p-value: the shift is above 0
  std::string test;     // "Wilcoxon signed-rank" | "Mann-Whitney"
};

// Paired differences d (candidate - baseline, per pair). Zero differences are dropped (Wilcoxon's
// convention); the estimate is the median of the Walsh averages (d_i + d_j) / 2, i <= j.
ShiftEstimate paired_shift(const std::vector<double>& d, double confidence = 0.95);

// Two independent samples: the shift of x over y (x - y); the estimate is the median of all
// differences x_i - y_j.
ShiftEstimate two_sample_shift(const std::vector<double>& x, const std::vector<double>& y, double confidence = 0.95);

// The smallest interval rank: the largest k with P(T <= k - 1) <= (1 - confidence) / 2 under the
// null distribution `counts` of an integer statistic (counts[t] ways to get t). 0: none exists.
int interval_rank(const std::vector<double>& counts, double confidence);

// Null distribution of the signed-rank statistic T+ (the sum of the ranks of the positive
// differences) for the given doubled ranks (midranks times two, so integers): counts[t] = the
// number of sign assignments with 2 * T+ = t.
std::vector<double> signed_rank_counts(const std::vector<int>& doubled_ranks);

// Null distribution of the rank sum of m items drawn from the pooled doubled ranks: counts[t] =
// the number of m-subsets whose doubled ranks sum to t.
std::vector<double> rank_sum_counts(const std::vector<int>& doubled_ranks, int m);

// Midranks of `values` (ties share the mean of their ranks, 1-based), doubled.
std::vector<int> doubled_midranks(const std::vector<double>& values);

}  // namespace shoplens
