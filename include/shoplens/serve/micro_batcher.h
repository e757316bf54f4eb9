// The micro-batcher between the HTTP threads and the model (docs/SERVING.md). Requests arrive one
// at a time; the model wants batches. It coalesces queued requests up to --max-batch or the queue
// delay, whichever comes first, or, with a p95 target, picks batch and wait from the measured
// batch->latency curve, the arrival rate and the oldest request's remaining budget. The queue is
// bounded (a full queue rejects at once) and every request has a timeout.
//
// Pure C++ (no torch, no sockets): the model is a BatchFn and time comes from a NowFn, so tests
// drive it with a fake model and a fake clock through run_once().
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "shoplens/infer/latency_curve.h"

namespace shoplens::serve {

using shoplens::LatencyCurve;
using shoplens::LatencyPoint;

using TimePoint = std::chrono::steady_clock::time_point;
using NowFn = std::function<TimePoint()>;

inline TimePoint steady_now() { return std::chrono::steady_clock::now(); }
inline double ms_between(TimePoint from, TimePoint to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}
inline TimePoint plus_ms(TimePoint t, double ms) {
  return t +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double, std::milli>(ms));
}

class ServeMetrics;

enum class RequestStatus { kPending, kDone, kRejected, kTimedOut, kFailed };
const char* status_name(RequestStatus status);

// What the model function measured for one batch.
struct BatchTiming {
  double h2d_ms = 0;      // assembling the batch and moving it to the device
  double compute_ms = 0;  // forward, softmax, reading back
};

// Runs the model on a batch: outputs[i] for inputs[i] (outputs arrives sized). Throws on failure:
// every request of the batch then fails with the message.
using BatchFn = std::function<BatchTiming(const std::vector<const std::vector<float>*>& inputs,
                                          std::vector<std::vector<float>>& outputs)>;

// One request's life: filled by the batcher, waited on by the HTTP thread.
class InferenceRequest {
 public:
  std::vector<float> input;
  std::vector<float> output;  // valid when status() == kDone
  std::string error;          // kFailed / kRejected: why
  TimePoint enqueued{};
  TimePoint deadline{};  // timeout: dropped (kTimedOut) if not dispatched by then
  double queue_wait_ms = 0;
  double h2d_ms = 0;
  double compute_ms = 0;
  int batch_size = 0;

  RequestStatus status() const;
  // Blocks up to `timeout` (real time) for the request to leave kPending; true when it did.
  bool wait_for(std::chrono::milliseconds timeout) const;

 private:
  friend class MicroBatcher;
  void finish(RequestStatus status);
  mutable std::mutex mutex_;
  mutable std::condition_variable cv_;
  RequestStatus status_ = RequestStatus::kPending;
};

// The longest queue `serve` accepts (--max-queue): every queued request holds an HTTP thread and
// its preprocessed input, and the HTTP pool is sized from it.
constexpr int kMaxQueueLength = 4096;

struct BatcherOptions {
  int max_batch = 8;
  double max_queue_delay_ms = 5;  // fixed mode: the oldest request waits at most this for company
  int max_queue = 256;            // requests waiting; one more is rejected at once
  double timeout_ms = 2000;       // a request not dispatched by then is dropped (timed out)
  double p95_target_ms = 0;       // > 0: deadline-aware mode over the latency curve
};

// The policy's decision at one instant: dispatch `size` requests now, or sleep until `wake`
// (an arrival also wakes the worker).
struct BatchPlan {
  int size = 0;
  TimePoint wake = TimePoint::max();
  int target = 0;  // deadline-aware mode: the batch the arrival rate needs (for tests and logs)
};

class MicroBatcher {
 public:
  MicroBatcher(BatcherOptions options, BatchFn model, NowFn now = steady_now, ServeMetrics* metrics = nullptr);
  ~MicroBatcher();
  MicroBatcher(const MicroBatcher&) = delete;
  MicroBatcher& operator=(const MicroBatcher&) = delete;

  // Queues `input`. A full queue (or a stopping batcher) answers kRejected at once.
  std::shared_ptr<InferenceRequest> submit(std::vector<float> input);

  // Drops requests past their timeout, then dispatches one batch if the policy says so and runs
  // the model on the calling thread. Returns the batch size run (0: none). The worker loop is
  // this plus a wait; tests call it directly with a fake clock.
  int run_once();
  BatchPlan plan() const;

  void set_curve(LatencyCurve curve);  // after warm-up; needed before p95 mode dispatches
  const LatencyCurve& curve() const { return curve_; }
  const BatcherOptions& options() const { return options_; }

  void start();  // the worker thread
  // Refuses new requests, answers every queued one (flushing without waiting for company), joins.
  void drain_and_stop();

  std::size_t queue_length() const;
  double arrival_rate_per_s() const;  // smoothed, decays while nothing arrives
  // Observed batch time / the curve's median for that size, smoothed: the p95 mode plans with the
  // curve times this (the warm-up may have run on a quieter machine than the one serving now).
  double latency_scale() const;

 private:
  BatchPlan plan_locked(TimePoint now) const;
  void expire_locked(TimePoint now, std::vector<std::shared_ptr<InferenceRequest>>& expired);
  void finish_expired(const std::vector<std::shared_ptr<InferenceRequest>>& expired, TimePoint dispatched);
  // Scales the latency curve towards what the model really took for a batch of `size`.
  void learn_latency(int size, const BatchTiming& timing);
  void finish_batch(const std::vector<std::shared_ptr<InferenceRequest>>& batch,
                    std::vector<std::vector<float>>& outputs, const BatchTiming& timing, const std::string& failure,
                    TimePoint dispatched);
  void worker_loop();

  BatcherOptions options_;
  BatchFn model_;
  NowFn now_;
  ServeMetrics* metrics_;
  LatencyCurve curve_;

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<InferenceRequest>> queue_;
  bool stopping_ = false;
  bool started_ = false;
  std::thread worker_;
  TimePoint last_arrival_{};
  bool seen_arrival_ = false;
  double interval_ewma_ms_ = 0;  // smoothed inter-arrival time
  double latency_scale_ = 1.0;
};

}  // namespace shoplens::serve
