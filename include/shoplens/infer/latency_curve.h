// A model's latency against batch size, measured once and planned with: serve's p95 mode and
// Triton's dynamic batching (export --format triton) choose their batch from it.
#pragma once

#include <functional>
#include <vector>

namespace shoplens {

// The model's measured latency against batch size (warm-up), interpolated linearly between the
// measured batches and extrapolated along the last segment. Made non-decreasing in the batch
// (a stalled measurement is capped by the next larger batch's).
struct LatencyPoint {
  int batch = 1;
  double p50_ms = 0;
  double p95_ms = 0;
};

class LatencyCurve {
 public:
  LatencyCurve() = default;
  explicit LatencyCurve(std::vector<LatencyPoint> points);  // sorted by batch here
  bool empty() const { return points_.empty(); }
  double p95_ms(int batch) const;
  double p50_ms(int batch) const;
  // The largest batch <= max_batch whose p95 fits `budget_ms` (at least 1).
  int largest_within(double budget_ms, int max_batch) const;
  const std::vector<LatencyPoint>& points() const { return points_; }

 private:
  std::vector<LatencyPoint> points_;
};

// The largest batch a curve is measured up to, and the most timed passes per batch: serve's and
// export --format triton's --max-batch and --warmup-reps. Each measured batch is held in memory
// whole (1024 images of 224 px are 600 MB of input alone), and a billion of them aborted serve.
constexpr int kMaxLatencyCurveBatch = 1024;
constexpr int kMaxLatencyCurveReps = 1000;

// Times `run_batch(b)` at batches 1, 2, 4, ... below max_batch and at max_batch: two untimed
// passes first (the allocator and oneDNN's primitive cache settle over a few), then `reps` timed
// ones; p50 and p95 per batch. `on_point` sees each point as it is measured; `stop` ends the
// measurement early (a signal during warm-up). UsageError for a max_batch or reps out of range.
LatencyCurve measure_latency_curve(const std::function<void(int batch)>& run_batch, int max_batch, int reps,
                                   const std::function<void(const LatencyPoint&)>& on_point = {},
                                   const std::function<bool()>& stop = {});

}  // namespace shoplens
