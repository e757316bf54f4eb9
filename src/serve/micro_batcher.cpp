#include "shoplens/serve/micro_batcher.h"

#include <algorithm>
#include <cmath>

#include "shoplens/core/enum_names.h"
#include "shoplens/serve/serve_metrics.h"

namespace shoplens::serve {

namespace {

constexpr EnumName<RequestStatus> kStatusNames[] = {{RequestStatus::kPending, "pending"},
                                                    {RequestStatus::kDone, "done"},
                                                    {RequestStatus::kRejected, "rejected"},
                                                    {RequestStatus::kTimedOut, "timed_out"},
                                                    {RequestStatus::kFailed, "failed"}};

}  // namespace

const char* status_name(RequestStatus status) { return name_in(kStatusNames, status); }

RequestStatus InferenceRequest::status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return status_;
}

bool InferenceRequest::wait_for(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mutex_);
  return cv_.wait_for(lock, timeout, [&] { return status_ != RequestStatus::kPending; });
}

void InferenceRequest::finish(RequestStatus status) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    status_ = status;
  }
  cv_.notify_all();
}

MicroBatcher::MicroBatcher(BatcherOptions options, BatchFn model, NowFn now, ServeMetrics* metrics)
    : options_(options), model_(std::move(model)), now_(std::move(now)), metrics_(metrics) {
  options_.max_batch = std::max(1, options_.max_batch);
  options_.max_queue = std::max(1, options_.max_queue);
}

MicroBatcher::~MicroBatcher() { drain_and_stop(); }

std::shared_ptr<InferenceRequest> MicroBatcher::submit(std::vector<float> input) {
  auto request = std::make_shared<InferenceRequest>();
  request->input = std::move(input);
  const TimePoint now = now_();
  request->enqueued = now;
  request->deadline = plus_ms(now, options_.timeout_ms);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ || queue_.size() >= static_cast<std::size_t>(options_.max_queue)) {
      request->error = stopping_ ? "the server is shutting down"
                                 : "queue full (" + std::to_string(queue_.size()) + " requests waiting)";
      request->finish(RequestStatus::kRejected);
      if (metrics_ != nullptr) metrics_->count_rejected();
      return request;
    }
    if (seen_arrival_) {
      const double gap = std::max(0.0, ms_between(last_arrival_, now));
      // Smoothed over ~10 arrivals: follows a burst within a few requests, ignores one odd gap.
      interval_ewma_ms_ = interval_ewma_ms_ <= 0 ? gap : 0.9 * interval_ewma_ms_ + 0.1 * gap;
    }
    seen_arrival_ = true;
    last_arrival_ = now;
    queue_.push_back(request);
  }
  cv_.notify_all();
  return request;
}

double MicroBatcher::arrival_rate_per_s() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!seen_arrival_ || interval_ewma_ms_ <= 0) return 0;
  // A lull counts: the rate never claims arrivals faster than the silence since the last one.
  const double interval = std::max(interval_ewma_ms_, ms_between(last_arrival_, now_()));
  return interval > 0 ? 1000.0 / interval : 0;
}

std::size_t MicroBatcher::queue_length() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.size();
}

void MicroBatcher::set_curve(LatencyCurve curve) {
  std::lock_guard<std::mutex> lock(mutex_);
  curve_ = std::move(curve);
  latency_scale_ = 1.0;
}

double MicroBatcher::latency_scale() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return latency_scale_;
}

BatchPlan MicroBatcher::plan() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return plan_locked(now_());
}

BatchPlan MicroBatcher::plan_locked(TimePoint now) const {
  BatchPlan plan;
  const int n = static_cast<int>(queue_.size());
  if (n == 0) return plan;
  const TimePoint oldest = queue_.front()->enqueued;
  // Draining flushes at once: nothing more will arrive to coalesce with.
  if (stopping_) {
    plan.size = std::min(n, options_.max_batch);
    return plan;
  }
  if (options_.p95_target_ms <= 0 || curve_.empty()) {
    plan.target = options_.max_batch;
    plan.wake = plus_ms(oldest, options_.max_queue_delay_ms);
    if (n >= options_.max_batch || now >= plan.wake) plan.size = std::min(n, options_.max_batch);
    return plan;
  }

  // Deadline-aware mode. Never build a batch whose compute alone misses the target. The warm-up
  // curve is scaled by what batches really cost lately (a busy machine, a hot device).
  const double target = options_.p95_target_ms;
  const double scale = latency_scale_;
  const int cap = curve_.largest_within(target / scale, options_.max_batch);
  // Arrivals per second, smoothed; a lull lowers it (the silence since the last arrival counts).
  double rate = 0;
  if (seen_arrival_ && interval_ewma_ms_ > 0) {
    const double interval = std::max(interval_ewma_ms_, ms_between(last_arrival_, now));
    rate = 1000.0 / interval;
  }
  // Overload: the oldest request has already missed the target and more than one in-budget batch
  // is waiting. Latency is lost for these; what helps now is draining the backlog fastest, with
  // the largest batch allowed (the most images/s), so that later requests meet the target again.
  if (ms_between(oldest, now) > target && n > cap) {
    plan.target = options_.max_batch;
    plan.size = std::min(n, options_.max_batch);
    return plan;
  }
  // The batch to wait for: the smallest that keeps up with the arrivals (median service time, 25%
  // headroom), among those that can fill at this rate and still finish (p95) within the target;
  // at low load that is 1 and a request goes alone at once (waiting would add latency and win
  // nothing). When none keeps up, the largest that can fill and finish in time: the most
  // throughput the target allows.
  int need = 0, fits = 1;
  for (int b = 1; b <= cap; ++b) {
    const double ms = scale * curve_.p95_ms(b);
    const double fill_ms = rate > 0 ? (b - 1) * 1000.0 / rate : 0;
    if (b > 1 && fill_ms + ms > target) break;  // both grow with b: larger ones do not fit either
    fits = b;
    const double median_ms = scale * curve_.p50_ms(b);
    if (median_ms <= 0 || b * 1000.0 / median_ms >= 1.25 * rate) {
      need = b;
      break;
    }
  }
  if (need == 0) need = fits;
  plan.target = need;
  // The oldest request has the least budget left: it must start by the time that leaves room for
  // the batch it waits for.
  plan.wake = plus_ms(oldest, target - scale * curve_.p95_ms(need));
  if (n >= need || now >= plan.wake) plan.size = std::min(n, cap);
  return plan;
}

void MicroBatcher::expire_locked(TimePoint now, std::vector<std::shared_ptr<InferenceRequest>>& expired) {
  // FIFO with one timeout: deadlines grow along the queue, so expired requests are at the front.
  while (!queue_.empty() && queue_.front()->deadline <= now) {
    expired.push_back(queue_.front());
    queue_.pop_front();
  }
}

int MicroBatcher::run_once() {
  std::vector<std::shared_ptr<InferenceRequest>> expired, batch;
  TimePoint dispatched;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    dispatched = now_();
    expire_locked(dispatched, expired);
    const BatchPlan plan = plan_locked(dispatched);
    for (int i = 0; i < plan.size; ++i) {
      batch.push_back(queue_.front());
      queue_.pop_front();
    }
  }
  finish_expired(expired, dispatched);
  if (batch.empty()) return 0;

  std::vector<const std::vector<float>*> inputs;
  inputs.reserve(batch.size());
  for (auto& r : batch) inputs.push_back(&r->input);
  std::vector<std::vector<float>> outputs(batch.size());
  BatchTiming timing;
  std::string failure;
  try {
    timing = model_(inputs, outputs);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  if (failure.empty()) learn_latency(static_cast<int>(batch.size()), timing);
  finish_batch(batch, outputs, timing, failure, dispatched);
  return static_cast<int>(batch.size());
}

void MicroBatcher::finish_expired(const std::vector<std::shared_ptr<InferenceRequest>>& expired, TimePoint dispatched) {
  for (const auto& r : expired) {
    r->queue_wait_ms = ms_between(r->enqueued, dispatched);
    r->error =
        "timed out after " + std::to_string(static_cast<long>(std::lround(r->queue_wait_ms))) + " ms in the queue";
    if (metrics_ != nullptr) metrics_->count_timed_out();
    r->finish(RequestStatus::kTimedOut);
  }
}

void MicroBatcher::learn_latency(int size, const BatchTiming& timing) {
  std::lock_guard<std::mutex> lock(mutex_);
  const double expected = curve_.empty() ? 0 : curve_.p50_ms(size);
  if (expected <= 0) return;
  // Smoothed over ~5 batches and bounded: one stall must not swing the plan by more than that.
  const double ratio = std::clamp((timing.h2d_ms + timing.compute_ms) / expected, 0.25, 20.0);
  latency_scale_ = 0.8 * latency_scale_ + 0.2 * ratio;
}

void MicroBatcher::finish_batch(const std::vector<std::shared_ptr<InferenceRequest>>& batch,
                                std::vector<std::vector<float>>& outputs, const BatchTiming& timing,
                                const std::string& failure, TimePoint dispatched) {
  const int size = static_cast<int>(batch.size());
  if (metrics_ != nullptr) {
    metrics_->observe_batch(size, std::chrono::steady_clock::now());
    metrics_->observe(Stage::kHostToDevice, timing.h2d_ms);
    metrics_->observe(Stage::kCompute, timing.compute_ms);
  }
  for (std::size_t i = 0; i < batch.size(); ++i) {
    auto& r = *batch[i];
    r.queue_wait_ms = ms_between(r.enqueued, dispatched);
    r.h2d_ms = timing.h2d_ms;
    r.compute_ms = timing.compute_ms;
    r.batch_size = size;
    if (metrics_ != nullptr) metrics_->observe(Stage::kQueueWait, r.queue_wait_ms);
    if (failure.empty()) {
      r.output = std::move(outputs[i]);
      r.finish(RequestStatus::kDone);
    } else {
      r.error = "model failed: " + failure;
      r.finish(RequestStatus::kFailed);
    }
  }
}

void MicroBatcher::start() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (started_) return;
  started_ = true;
  worker_ = std::thread([this] { worker_loop(); });
}

void MicroBatcher::worker_loop() {
  for (;;) {
    if (run_once() > 0) continue;
    std::unique_lock<std::mutex> lock(mutex_);
    if (stopping_ && queue_.empty()) return;
    const TimePoint now = now_();
    BatchPlan plan = plan_locked(now);
    if (plan.size > 0) continue;
    TimePoint wake = plan.wake;
    if (!queue_.empty()) wake = std::min(wake, queue_.front()->deadline);
    // The wait is on the real clock; an arrival, a stop or the wake time ends it.
    const std::size_t seen = queue_.size();
    if (wake == TimePoint::max())
      cv_.wait(lock, [&] { return stopping_ || queue_.size() != seen; });
    else
      cv_.wait_until(lock, wake, [&] { return stopping_ || queue_.size() != seen; });
  }
}

void MicroBatcher::drain_and_stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) {
    worker_.join();
  } else {
    while (run_once() > 0) {}
  }
}

}  // namespace shoplens::serve
