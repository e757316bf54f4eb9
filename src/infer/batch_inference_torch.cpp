// Batches of rows through an InferenceSession, decoding ahead of the model (batch_inference.h).
#include "batch_inference.h"

#include <torch/torch.h>

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "shoplens/core/errors.h"
#include "shoplens/core/interrupt.h"
#include "shoplens/core/runtime.h"
#include "shoplens/core/stats.h"

#ifdef SHOPLENS_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace shoplens {
using json = nlohmann::json;

// One batch of a range, decoded and preprocessed by a worker.
struct PreparedBatch {
  at::Tensor images;              // [n_ok, 3, S, S], in pinned host memory on CUDA
  std::vector<std::size_t> rows;  // rows of the images, in order
  std::vector<RowResult> errors;  // rows that could not be read
};

namespace {
// One batch of a chunk, decoded and preprocessed by a worker.

// A batch on its way to the device. On CPU it is the host tensor itself. On CUDA the copy runs
// on a separate stream from pinned memory (non-blocking, so it overlaps the compute stream's
// work on the previous batch), and the compute stream waits for it on the device, not the host.
class DeviceBatch {
 public:
  DeviceBatch() = default;
  DeviceBatch(const at::Tensor& host, const InferenceSession& session) {
#ifdef SHOPLENS_WITH_CUDA
    if (session.on_cuda()) {
      // One copy stream per process is enough: copies are issued from the compute thread only.
      static const c10::cuda::CUDAStream copy_stream = c10::cuda::getStreamFromPool(false);
      c10::cuda::CUDAStreamGuard on_copy_stream(copy_stream);
      tensor_ = session.to_device(host, /*non_blocking=*/true);
      copied_ = std::make_shared<at::cuda::CUDAEvent>();
      copied_->record(copy_stream);
      return;
    }
#endif
    tensor_ = session.to_device(host);  // CPU: no copy at all
  }

  // The device tensor, safe to use on the current (compute) stream.
  const at::Tensor& ready() {
#ifdef SHOPLENS_WITH_CUDA
    if (copied_) {
      const auto compute = c10::cuda::getCurrentCUDAStream(tensor_.device().index());
      copied_->block(compute);
      // The memory was allocated on the copy stream: keep the caching allocator from handing it
      // back to that stream before the compute stream is done with it.
      tensor_.record_stream(compute);
      copied_.reset();
    }
#endif
    return tensor_;
  }

 private:
  at::Tensor tensor_;
#ifdef SHOPLENS_WITH_CUDA
  std::shared_ptr<at::cuda::CUDAEvent> copied_;
#endif
};

// Batches 0..n-1 prepared by worker threads at most `ahead` batches in front of the consumer,
// taken in order. A worker's exception is rethrown by take(). The destructor stops and joins the
// workers, so an exception in the consumer cannot leave them running.
class DecodeAhead {
 public:
  DecodeAhead(std::size_t n_batches, std::size_t ahead, int workers, std::function<PreparedBatch(std::size_t)> prepare)
      : n_batches_(n_batches), ahead_(ahead), prepare_(std::move(prepare)) {
    for (int w = 0; w < workers; ++w) threads_.emplace_back([this] { work(); });
  }
  ~DecodeAhead() { stop(); }
  DecodeAhead(const DecodeAhead&) = delete;
  DecodeAhead& operator=(const DecodeAhead&) = delete;

  // Batch k; without `wait`, only if it is already prepared. Records the queue length it saw.
  std::optional<PreparedBatch> take(std::size_t k, bool wait, BatchTimings& timing) {
    std::optional<PreparedBatch> p;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (wait) ready_cv_.wait(lock, [&] { return failure_ || ready_.count(k); });
      if (failure_) std::rethrow_exception(failure_);
      if (!ready_.count(k)) return p;
      ++timing.queue_lengths[static_cast<int>(ready_.size() - 1)];
      p = std::move(ready_.at(k));
      ready_.erase(k);
      consumed_ = k + 1;
    }
    room_cv_.notify_all();
    return p;
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    room_cv_.notify_all();
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }

 private:
  void work() {
    for (;;) {
      std::size_t k;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        room_cv_.wait(lock, [&] { return stop_ || next_job_ < consumed_ + ahead_; });
        if (stop_) return;
        k = next_job_++;
      }
      if (k >= n_batches_) return;
      try {
        PreparedBatch p = prepare_(k);
        std::lock_guard<std::mutex> lock(mutex_);
        ready_.emplace(k, std::move(p));
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        failure_ = std::current_exception();
      }
      ready_cv_.notify_all();
    }
  }

  const std::size_t n_batches_, ahead_;
  std::function<PreparedBatch(std::size_t)> prepare_;
  std::mutex mutex_;
  std::condition_variable ready_cv_, room_cv_;
  std::map<std::size_t, PreparedBatch> ready_;
  std::exception_ptr failure_;
  std::size_t next_job_ = 0, consumed_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace

BatchInference::BatchInference(InferenceSession& session, const ScoreRows& rows, int workers, bool keep_logits)
    : session_(session), rows_(rows), workers_(workers > 0 ? workers : usable_cores()), keep_logits_(keep_logits) {}

PreparedBatch BatchInference::prepare(std::size_t begin, std::size_t end) const {
  PreparedBatch p;
  std::vector<std::size_t> ok;
  auto images = session_.host_batch(static_cast<std::int64_t>(end - begin));
  float* dst = images.data_ptr<float>();
  for (std::size_t row = begin; row < end; ++row) {
    try {
      const cv::Mat rgb = rows_.image(row);
      session_.preprocess(rgb, dst + ok.size() * session_.floats_per_sample());
      ok.push_back(row);
    } catch (const std::exception& e) {
      RowResult r;
      r.row = row;
      r.error = error_message(e);
      p.errors.push_back(std::move(r));
    }
  }
  p.images = images.narrow(0, 0, static_cast<std::int64_t>(ok.size()));
  p.rows = std::move(ok);
  return p;
}

void BatchInference::add_batch_results(const std::vector<std::size_t>& rows, const InferenceOutput& out,
                                       std::vector<RowResult>& results) const {
  const auto top = out.probabilities.argmax(1);
  const std::int64_t* top1 = top.data_ptr<std::int64_t>();
  const float* probs = out.probabilities.data_ptr<float>();
  const float* logits = out.logits.data_ptr<float>();
  const auto classes = static_cast<std::size_t>(out.probabilities.size(1));
  for (std::size_t i = 0; i < rows.size(); ++i) {
    RowResult r;
    r.row = rows[i];
    r.ok = true;
    r.label = static_cast<int>(top1[i]);
    r.probs.assign(probs + i * classes, probs + (i + 1) * classes);
    if (keep_logits_) r.logits.assign(logits + i * classes, logits + (i + 1) * classes);
    results.push_back(std::move(r));
  }
}

std::vector<RowResult> BatchInference::run_range(std::size_t begin, std::size_t end, int batch, BatchTimings& timing) {
  const auto start = SteadyClock::now();
  const std::size_t n_batches = (end - begin + batch - 1) / batch;
  DecodeAhead decoded(n_batches, static_cast<std::size_t>(2 * workers_), workers_, [&](std::size_t k) -> PreparedBatch {
    return prepare(begin + k * batch, std::min(end, begin + (k + 1) * batch));
  });
  struct Staged {
    PreparedBatch p;
    DeviceBatch device;
  };
  auto stage = [&](PreparedBatch p) {
    Staged s{std::move(p), {}};
    if (!s.p.rows.empty()) s.device = DeviceBatch(s.p.images, session_);
    return s;
  };
  std::vector<RowResult> results;
  results.reserve(end - begin);
  std::optional<Staged> next;  // CUDA: batch k+1, already copying while batch k computes
  for (std::size_t k = 0; k < n_batches; ++k) {
    Staged cur = next ? std::move(*next) : stage(std::move(*decoded.take(k, /*wait=*/true, timing)));
    next.reset();
    if (session_.on_cuda() && k + 1 < n_batches)
      if (auto p = decoded.take(k + 1, /*wait=*/false, timing)) next = stage(std::move(*p));
    for (auto& e : cur.p.errors) results.push_back(std::move(e));
    if (!cur.p.rows.empty()) {
      const auto t0 = SteadyClock::now();
      const InferenceOutput out = session_.run(cur.device.ready());
      const double secs = seconds_since(t0);
      timing.batch_ms.add(secs * 1e3);
      timing.batch_sizes[static_cast<int>(cur.p.rows.size())]++;
      timing.compute_seconds += secs;
      timing.images += static_cast<std::int64_t>(cur.p.rows.size());
      add_batch_results(cur.p.rows, out, results);
    }
    if (interrupt_requested()) break;
  }
  decoded.stop();
  std::sort(results.begin(), results.end(), [](const RowResult& a, const RowResult& b) { return a.row < b.row; });
  timing.wall_seconds += seconds_since(start);
  return results;
}

std::vector<double> BatchInference::time_compute(int batch, int reps) {
  auto input = session_.host_batch(batch);  // pinned on CUDA: the job's own copy path
  input.normal_();
  // A few passes first: the allocator and oneDNN's primitive cache take several to settle.
  for (int warm = 0; warm < 3; ++warm) session_.run(input);
  std::vector<double> ms;
  for (int rep = 0; rep < reps; ++rep) {
    const auto t0 = SteadyClock::now();
    session_.run(input);
    ms.push_back(seconds_since(t0) * 1e3);
  }
  return ms;
}

json BatchInference::choose_batch(double max_latency_ms, int max_batch, int& chosen) {
  json curve = json::array();
  chosen = 1;
  for (int b = 1; b <= max_batch; b *= 2) {
    const std::vector<double> ms = time_compute(b, 7);
    const double p95 = percentile(ms, 0.95);
    const bool fits = p95 <= max_latency_ms;
    curve.push_back({{"batch", b},
                     {"p50_ms", percentile(ms, 0.5)},
                     {"p95_ms", p95},
                     {"images_per_second", b / (percentile(ms, 0.5) / 1e3)},
                     {"fits", fits}});
    if (!fits) break;  // latency grows with the batch: larger ones will not fit either
    chosen = b;
  }
  return curve;
}

}  // namespace shoplens
