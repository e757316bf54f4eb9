// Internal to src/infer: rows of an input through an InferenceSession in batches, with worker
// threads decoding ahead of the model and, on CUDA, the next batch's copy overlapping the current
// batch's compute. Used by score (chunked, resumable) and by predict and evaluate.
#pragma once

#include <chrono>
#include <cstdint>
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

struct BatchTimings {
  std::vector<double> batch_ms;  // compute per batch (host to device, forward, softmax, read back)
  std::map<int, std::int64_t> batch_sizes;
  std::vector<double> queue_lengths;
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
