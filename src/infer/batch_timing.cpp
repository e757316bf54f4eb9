// The bounded-memory summaries of a scoring run's batches (batch_inference.h).
#include <algorithm>
#include <climits>
#include <cmath>

#include "batch_inference.h"

namespace shoplens {
namespace {

const double kBucketWidth = std::log(1.01);  // each bucket spans 1%
constexpr int kNonPositive = INT_MIN;        // durations <= 0 (a clock that did not move)

// The k-th smallest (0-based) of values counted by key, each key standing for `value(key)`.
template <class Key, class ValueOf>
double kth_counted(const std::map<Key, std::int64_t>& counts, std::int64_t k, ValueOf value) {
  std::int64_t seen = 0;
  for (const auto& [key, n] : counts) {
    seen += n;
    if (k < seen) return value(key);
  }
  return counts.empty() ? 0.0 : value(counts.rbegin()->first);
}

// numpy's linear interpolation between the closest ranks, over `count` counted values.
template <class KthValue>
double interpolated(std::int64_t count, double q, KthValue kth) {
  if (count == 0) return 0;
  const double pos = std::clamp(q, 0.0, 1.0) * static_cast<double>(count - 1);
  const auto lo = static_cast<std::int64_t>(pos);
  const std::int64_t hi = std::min(lo + 1, count - 1);
  const double a = kth(lo), b = kth(hi);
  return a + (b - a) * (pos - static_cast<double>(lo));
}

}  // namespace

void DurationHistogram::add(double ms) {
  // Bounded before the cast: a bucket index is an int (1e12 ms, 30 years, is bucket 2777).
  const int bucket = ms > 0 ? static_cast<int>(std::floor(std::log(std::min(ms, 1e12)) / kBucketWidth)) : kNonPositive;
  ++buckets_[bucket];
  min_ = count_ == 0 ? ms : std::min(min_, ms);
  max_ = count_ == 0 ? ms : std::max(max_, ms);
  ++count_;
}

double DurationHistogram::percentile(double q) const {
  // A bucket stands for its geometric middle, kept within the smallest and largest seen.
  auto value = [&](int bucket) {
    if (bucket == kNonPositive) return std::min(0.0, max_);
    return std::clamp(std::exp((bucket + 0.5) * kBucketWidth), min_, max_);
  };
  return interpolated(count_, q, [&](std::int64_t k) {
    if (k == 0) return min_;
    if (k == count_ - 1) return max_;
    return kth_counted(buckets_, k, value);
  });
}

double percentile_of_counts(const std::map<int, std::int64_t>& counts, double q) {
  std::int64_t total = 0;
  for (const auto& entry : counts) total += entry.second;
  return interpolated(
      total, q, [&](std::int64_t k) { return kth_counted(counts, k, [](int v) { return static_cast<double>(v); }); });
}

}  // namespace shoplens
