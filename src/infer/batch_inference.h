// Internal to src/infer: rows of an input through an InferenceSession in batches, with worker
// threads decoding ahead of the model and, on CUDA, the next batch's copy overlapping the current
// batch's compute. Used by score (chunked, resumable) and by predict and evaluate.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shoplens/infer/inference_session.h"
#include "shoplens/infer/scorer.h"

namespace shoplens {

struct RowResult {
  std::size_t row = 0;
  bool ok = false;
  int label = -1;  // the most probable class
  std::vector<float> probs;
  std::vector<float> logits;  // only when the runner keeps them
  std::string error;
};

// The most rows of an input held at once (ScoreRows::load_window): predict, evaluate and score
// read their rows this many at a time, so memory does not grow with the input (a window of rows
// and their results is about a megabyte). The decode workers start afresh with each window, so a
// window holds many batches: refilling the pipeline costs about one batch in 64 at batch 64.
constexpr std::size_t kRowWindow = 4096;

// Rows [begin, end) a window at a time: each window loaded, then `visit(window_begin, window_end)`.
inline void for_each_window(ScoreRows& rows, std::size_t begin, std::size_t end,
                            const std::function<void(std::size_t, std::size_t)>& visit) {
  for (std::size_t first = begin; first < end; first += kRowWindow) {
    const std::size_t last = std::min(end, first + kRowWindow);
    rows.load_window(first, last);
    visit(first, last);
  }
}

// Durations in log-spaced buckets 1% wide: percentiles within 1% in constant memory, however many
// batches a job runs.
class DurationHistogram {
 public:
  void add(double ms);
  // The q-quantile (0..1), within 1% (the smallest and largest are exact); 0 when empty.
  double percentile(double q) const;
  std::int64_t count() const { return count_; }

 private:
  std::map<int, std::int64_t> buckets_;
  std::int64_t count_ = 0;
  double min_ = 0, max_ = 0;
};

// The q-quantile of small integers counted by value (numpy's linear interpolation); 0 when empty.
double percentile_of_counts(const std::map<int, std::int64_t>& counts, double q);

struct BatchTimings {
  DurationHistogram batch_ms;  // compute per batch (host to device, forward, softmax, read back)
  std::map<int, std::int64_t> batch_sizes;
  std::map<int, std::int64_t> queue_lengths;  // ready batches when one was taken -> times seen
  double compute_seconds = 0;
  double wall_seconds = 0;
  std::int64_t images = 0;
};

using SteadyClock = std::chrono::steady_clock;
inline double seconds_since(SteadyClock::time_point t) {
  return std::chrono::duration<double>(SteadyClock::now() - t).count();
}

struct PreparedBatch;

class BatchInference {
 public:
  // `workers` decode threads (0: usable cores); `keep_logits` fills RowResult::logits.
  BatchInference(InferenceSession& session, const ScoreRows& rows, int workers, bool keep_logits = false);

  // Rows [begin, end), one result per row in row order (unreadable rows are error results). Stops
  // early, returning fewer results, once an interrupt was requested.
  std::vector<RowResult> run_range(std::size_t begin, std::size_t end, int batch, BatchTimings& timing);

  // Compute alone (no decoding) on synthetic input: `reps` timed passes (ms) after a warm-up.
  std::vector<double> time_compute(int batch, int reps);

  // The batch / latency curve on synthetic input (powers of 2 up to max_batch); `chosen` is the
  // largest batch whose p95 fits max_latency_ms.
  nlohmann::json choose_batch(double max_latency_ms, int max_batch, int& chosen);

  InferenceSession& session() { return session_; }
  int workers() const { return workers_; }

 private:
  PreparedBatch prepare(std::size_t begin, std::size_t end) const;
  void add_batch_results(const std::vector<std::size_t>& rows, const InferenceOutput& out,
                         std::vector<RowResult>& results) const;

  InferenceSession& session_;
  const ScoreRows& rows_;
  int workers_ = 1;
  bool keep_logits_ = false;
};

}  // namespace shoplens
