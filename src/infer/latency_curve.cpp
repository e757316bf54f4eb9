#include "shoplens/infer/latency_curve.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "shoplens/core/errors.h"
#include "shoplens/core/stats.h"

namespace shoplens {

LatencyCurve::LatencyCurve(std::vector<LatencyPoint> points) : points_(std::move(points)) {
  std::sort(points_.begin(), points_.end(), [](const auto& a, const auto& b) { return a.batch < b.batch; });
  // A batch never costs more than a larger one: on a busy machine one size's timing can catch a
  // stall (seen: batch 2 at 1.4 s between batch 1 and 4 at 50-90 ms), which would otherwise make
  // the planner avoid that size and everything it interpolates through.
  for (std::size_t i = points_.size(); i-- > 1;) {
    points_[i - 1].p50_ms = std::min(points_[i - 1].p50_ms, points_[i].p50_ms);
    points_[i - 1].p95_ms = std::min(points_[i - 1].p95_ms, points_[i].p95_ms);
  }
}

namespace {
template <typename Get>
double interpolate(const std::vector<LatencyPoint>& points, int batch, Get get) {
  if (points.empty()) return 0;
  if (points.size() == 1) return get(points[0]) * batch / points[0].batch;
  std::size_t hi = 1;
  while (hi + 1 < points.size() && points[hi].batch < batch) ++hi;
  const auto& a = points[hi - 1];
  const auto& b = points[hi];
  if (batch <= a.batch) return get(a);
  const double slope = (get(b) - get(a)) / (b.batch - a.batch);
  return get(a) + slope * (batch - a.batch);
}
}  // namespace

double LatencyCurve::p95_ms(int batch) const {
  return interpolate(points_, batch, [](const LatencyPoint& p) { return p.p95_ms; });
}
double LatencyCurve::p50_ms(int batch) const {
  return interpolate(points_, batch, [](const LatencyPoint& p) { return p.p50_ms; });
}

int LatencyCurve::largest_within(double budget_ms, int max_batch) const {
  int best = 1;
  for (int b = 1; b <= max_batch; ++b)
    if (p95_ms(b) <= budget_ms) best = b;
  return best;
}

LatencyCurve measure_latency_curve(const std::function<void(int batch)>& run_batch, int max_batch, int reps,
                                   const std::function<void(const LatencyPoint&)>& on_point,
                                   const std::function<bool()>& stop) {
  using Clock = std::chrono::steady_clock;
  if (max_batch < 1 || max_batch > kMaxLatencyCurveBatch || reps < 1 || reps > kMaxLatencyCurveReps)
    throw UsageError("a latency curve is measured at batches 1 to " + std::to_string(kMaxLatencyCurveBatch) +
                     " with 1 to " + std::to_string(kMaxLatencyCurveReps) + " timed passes each, got batch " +
                     std::to_string(max_batch) + " and " + std::to_string(reps) + " passes");
  std::vector<int> batches;
  for (int b = 1; b < max_batch; b *= 2) batches.push_back(b);
  batches.push_back(std::max(1, max_batch));
  std::vector<LatencyPoint> points;
  for (int b : batches) {
    for (int warm = 0; warm < 2; ++warm) run_batch(b);
    std::vector<double> ms;
    for (int r = 0; r < std::max(1, reps); ++r) {
      const auto t0 = Clock::now();
      run_batch(b);
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    points.push_back({b, percentile(ms, 0.5), percentile(ms, 0.95)});
    if (on_point) on_point(points.back());
    if (stop && stop()) break;
  }
  return LatencyCurve(points);
}

}  // namespace shoplens
