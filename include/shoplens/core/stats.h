// Small summary statistics for benchmarks and reports.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace shoplens {

// Linear interpolation between closest ranks (numpy's default); 0 for an empty sample.
inline double percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double pos = q * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<std::size_t>(pos);
  const auto hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (values[hi] - values[lo]) * (pos - static_cast<double>(lo));
}

// The mean; NaN for an empty sample.
inline double mean_of(const std::vector<double>& values) {
  double sum = 0;
  for (double x : values) sum += x;
  return values.empty() ? NAN : sum / static_cast<double>(values.size());
}

// Sample standard deviation (n - 1); 0 for fewer than two values.
inline double sample_sd(const std::vector<double>& values) {
  if (values.size() < 2) return 0;
  const double m = mean_of(values);
  double ss = 0;
  for (double x : values) ss += (x - m) * (x - m);
  return std::sqrt(ss / static_cast<double>(values.size() - 1));
}

// The mean of the finite values (NaN when there are none); `missing` counts the others.
inline double mean_of_finite(const std::vector<double>& values, int* missing = nullptr) {
  double sum = 0;
  int n = 0;
  for (double x : values)
    if (std::isfinite(x)) sum += x, ++n;
  if (missing) *missing = static_cast<int>(values.size()) - n;
  return n > 0 ? sum / n : NAN;
}

}  // namespace shoplens
