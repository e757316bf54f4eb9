#include "shoplens/infer/scorer.h"

#include <torch/torch.h>

#include <signal.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/json_limits.h"
#include "shoplens/core/hash.h"
#include "shoplens/core/interrupt.h"
#include "shoplens/core/price_table.h"
#include "shoplens/core/progress.h"
#include "shoplens/core/runtime.h"
#include "shoplens/core/stats.h"
#include "shoplens/data/augment.h"
#include "shoplens/data/csv.h"
#include "shoplens/infer/model_export.h"
#include "shoplens/models/classifier.h"
#include "shoplens/train/amp.h"

#ifdef SHOPLENS_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace shoplens {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct RowResult {
  std::size_t row = 0;
  bool ok = false;
  int label = -1;
  std::vector<float> probs;
  std::string error;
};

// One batch of a chunk, decoded and preprocessed by a worker.
struct Prepared {
  at::Tensor images;              // [n_ok, 3, S, S], in pinned host memory on CUDA
  std::vector<std::size_t> rows;  // rows of the images, in order
  std::vector<RowResult> errors;  // rows that could not be read
};

// A batch on its way to the device. On CPU it is the host tensor itself. On CUDA the copy runs
// on a separate stream from pinned memory (non-blocking, so it overlaps the compute stream's
// work on the previous batch), and the compute stream waits for it on the device, not the host.
class DeviceBatch {
 public:
  DeviceBatch() = default;
  DeviceBatch(const at::Tensor& host, const torch::Device& device) {
#ifdef SHOPLENS_WITH_CUDA
    if (device.is_cuda()) {
      // One copy stream per process is enough: copies are issued from the compute thread only.
      static const c10::cuda::CUDAStream copy_stream = c10::cuda::getStreamFromPool(false, device.index());
      c10::cuda::CUDAStreamGuard on_copy_stream(copy_stream);
      tensor_ = host.to(device, /*non_blocking=*/true);
      copied_ = std::make_shared<at::cuda::CUDAEvent>();
      copied_->record(copy_stream);
      return;
    }
#endif
    tensor_ = host.to(device);  // CPU: no copy at all
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

struct Timing {
  std::vector<double> batch_ms;   // compute per batch (host to device, forward, softmax, read back)
  std::map<int, std::int64_t> batch_sizes;
  std::vector<double> queue_lengths;
  double compute_seconds = 0;
  double wall_seconds = 0;
  std::int64_t images = 0;
};

// Batches 0..n-1 prepared by worker threads at most `ahead` batches in front of the consumer,
// taken in order. A worker's exception is rethrown by take(). The destructor stops and joins the
// workers, so an exception in the consumer cannot leave them running.
class DecodeAhead {
 public:
  DecodeAhead(std::size_t n_batches, std::size_t ahead, int workers, std::function<Prepared(std::size_t)> prepare)
      : n_batches_(n_batches), ahead_(ahead), prepare_(std::move(prepare)) {
    for (int w = 0; w < workers; ++w) threads_.emplace_back([this] { work(); });
  }
  ~DecodeAhead() { stop(); }
  DecodeAhead(const DecodeAhead&) = delete;
  DecodeAhead& operator=(const DecodeAhead&) = delete;

  // Batch k; without `wait`, only if it is already prepared. Records the queue length it saw.
  std::optional<Prepared> take(std::size_t k, bool wait, Timing& timing) {
    std::optional<Prepared> p;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (wait) ready_cv_.wait(lock, [&] { return failure_ || ready_.count(k); });
      if (failure_) std::rethrow_exception(failure_);
      if (!ready_.count(k)) return p;
      timing.queue_lengths.push_back(static_cast<double>(ready_.size() - 1));
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
        Prepared p = prepare_(k);
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
  std::function<Prepared(std::size_t)> prepare_;
  std::mutex mutex_;
  std::condition_variable ready_cv_, room_cv_;
  std::map<std::size_t, Prepared> ready_;
  std::exception_ptr failure_;
  std::size_t next_job_ = 0, consumed_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

class Job {
 public:
  Job(const ScoreOptions& o, LoadedModel model, const ScoreRows& rows)
      : o_(o), loaded_(std::move(model)), rows_(rows), augmenter_(loaded_.preprocessing, /*train=*/false) {
    precision_ = parse_precision(o_.precision);
    cuda_ = wants_cuda(o_.device);
    if (precision_ == Precision::kFp16 && !cuda_)
      throw UsageError("score: --precision fp16 needs CUDA (CPU autocast supports bf16 only)");
    device_ = cuda_ ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
    loaded_.model->to(device_);
    loaded_.model->eval();
    workers_ = o_.workers > 0 ? o_.workers : usable_cores();
  }

  Precision precision() const { return precision_; }
  int image_size() const { return augmenter_.output_size(); }

  // Starts moving a host batch to the device (a no-op on CPU).
  DeviceBatch upload(const at::Tensor& images) const { return DeviceBatch(images, device_); }

  // Logits -> probabilities for a batch of preprocessed images, in the job's precision.
  at::Tensor probabilities(const at::Tensor& images, Precision precision) {
    DeviceBatch batch = upload(images);
    return probabilities(batch, precision);
  }
  at::Tensor probabilities(DeviceBatch& batch, Precision precision) {
    c10::InferenceMode inference;  // no autograd bookkeeping at all (lighter than NoGradGuard)
    AutocastScope autocast(cuda_, precision);
    auto logits = loaded_.model->forward(batch.ready());
    return torch::softmax(logits.to(torch::kFloat), 1).to(torch::kCPU);
  }

  // Host memory for a batch: pinned on CUDA (non-blocking copies need page-locked memory; the
  // caching host allocator reuses the blocks once their copies are done), pageable on CPU.
  at::Tensor host_batch(std::int64_t n) const {
    const int s = image_size();
    return torch::empty({n, 3, s, s}, torch::TensorOptions().dtype(torch::kFloat).pinned_memory(cuda_));
  }

  Prepared prepare(std::size_t begin, std::size_t end) const {
    Prepared p;
    std::vector<std::size_t> ok;
    auto images = host_batch(static_cast<std::int64_t>(end - begin));
    float* dst = images.data_ptr<float>();
    for (std::size_t row = begin; row < end; ++row) {
      try {
        const cv::Mat rgb = rows_.image(row);
        augmenter_.apply(rgb, 0, dst + ok.size() * augmenter_.floats_per_sample());
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

  // Scores rows [begin, end) in batches: workers decode ahead, the caller's thread computes.
  std::vector<RowResult> score_range(std::size_t begin, std::size_t end, int batch, Timing& timing) {
    const auto start = Clock::now();
    const std::size_t n_batches = (end - begin + batch - 1) / batch;
    DecodeAhead decoded(n_batches, static_cast<std::size_t>(2 * workers_), workers_, [&](std::size_t k) {
      return prepare(begin + k * batch, std::min(end, begin + (k + 1) * batch));
    });
    struct Staged {
      Prepared p;
      DeviceBatch device;
    };
    auto stage = [&](Prepared p) {
      Staged s{std::move(p), {}};
      if (!s.p.rows.empty()) s.device = upload(s.p.images);
      return s;
    };
    std::vector<RowResult> results;
    results.reserve(end - begin);
    std::optional<Staged> next;  // CUDA: batch k+1, already copying while batch k computes
    for (std::size_t k = 0; k < n_batches; ++k) {
      Staged cur = next ? std::move(*next) : stage(std::move(*decoded.take(k, /*wait=*/true, timing)));
      next.reset();
      if (cuda_ && k + 1 < n_batches)
        if (auto p = decoded.take(k + 1, /*wait=*/false, timing)) next = stage(std::move(*p));
      for (auto& e : cur.p.errors) results.push_back(std::move(e));
      if (!cur.p.rows.empty()) score_batch(cur.p.rows, cur.device, timing, results);
      if (interrupt_requested()) break;
    }
    decoded.stop();
    std::sort(results.begin(), results.end(), [](const RowResult& a, const RowResult& b) { return a.row < b.row; });
    timing.wall_seconds += seconds_since(start);
    return results;
  }

  // The model on one uploaded batch; one result per row.
  void score_batch(const std::vector<std::size_t>& rows, DeviceBatch& device, Timing& timing,
                   std::vector<RowResult>& results) {
    const auto t0 = Clock::now();
    const at::Tensor probs = probabilities(device, precision_).contiguous();
    const double secs = seconds_since(t0);
    timing.batch_ms.push_back(secs * 1e3);
    timing.batch_sizes[static_cast<int>(rows.size())]++;
    timing.compute_seconds += secs;
    timing.images += static_cast<std::int64_t>(rows.size());
    const auto top = probs.argmax(1);
    const float* data = probs.data_ptr<float>();
    const auto classes = static_cast<std::size_t>(probs.size(1));
    for (std::size_t i = 0; i < rows.size(); ++i) {
      RowResult r;
      r.row = rows[i];
      r.ok = true;
      r.label = static_cast<int>(top[static_cast<std::int64_t>(i)].item<std::int64_t>());
      r.probs.assign(data + i * classes, data + (i + 1) * classes);
      results.push_back(std::move(r));
    }
  }

  // Compute alone (no decoding running) on synthetic input: `reps` timed passes after a warm-up.
  std::vector<double> time_compute(int batch, int reps) {
    auto input = host_batch(batch);  // pinned on CUDA: the job's own copy path
    input.normal_();
    // A few passes first: the allocator and oneDNN's primitive cache take several to settle.
    for (int warm = 0; warm < 3; ++warm) probabilities(input, precision_);
    std::vector<double> ms;
    for (int rep = 0; rep < reps; ++rep) {
      const auto t0 = Clock::now();
      probabilities(input, precision_);
      ms.push_back(seconds_since(t0) * 1e3);
    }
    return ms;
  }

  // The batch-size / latency curve on synthetic input; the largest batch whose p95 fits.
  json choose_batch(double max_latency_ms, int max_batch, int& chosen) {
    json curve = json::array();
    chosen = 1;
    for (int b = 1; b <= max_batch; b *= 2) {
      const std::vector<double> ms = time_compute(b, 7);
      const double p95 = percentile(ms, 0.95);
      const bool fits = p95 <= max_latency_ms;
      curve.push_back({{"batch", b}, {"p50_ms", percentile(ms, 0.5)}, {"p95_ms", p95},
                       {"images_per_second", b / (percentile(ms, 0.5) / 1e3)}, {"fits", fits}});
      if (!fits) break;  // latency grows with the batch: larger ones will not fit either
      chosen = b;
    }
    return curve;
  }

  const std::vector<std::string>& class_names() const { return loaded_.class_names; }

 private:
  ScoreOptions o_;
  LoadedModel loaded_;
  const ScoreRows& rows_;
  Augmenter augmenter_;
  Precision precision_ = Precision::kFp32;
  bool cuda_ = false;
  torch::Device device_{torch::kCPU};
  int workers_ = 1;
};

// A writer killed mid-write (SIGKILL, SIGXFSZ) leaves its hidden temporary (".NAME.tmp-PID-N",
// see atomic_file.cpp) behind; it never looks like a chunk, but it holds disk space that a rerun
// after a full disk needs. Only temporaries of processes that are gone are removed.
void remove_stale_temporaries(const fs::path& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const auto tmp = name.rfind(".tmp-");
    if (name.empty() || name[0] != '.' || tmp == std::string::npos) continue;
    const long pid = std::strtol(name.c_str() + tmp + 5, nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      fs::remove(entry.path(), ec);
      spdlog::info("score: removed {} left by an earlier run that did not finish", entry.path().string());
    }
  }
}

std::string chunk_name(std::size_t index) { return fmt::format("chunk-{:06d}.csv", index); }

std::vector<std::string> csv_header(const std::vector<std::string>& classes) {
  std::vector<std::string> h{"row", "id", "status", "label", "confidence"};
  for (const auto& c : classes) h.push_back("p_" + c);
  h.push_back("error");
  return h;
}

std::string chunk_csv(const std::vector<RowResult>& results, const ScoreRows& rows, const std::vector<std::string>& classes) {
  std::string out;
  for (const auto& r : results) {
    std::vector<std::string> f{std::to_string(r.row), rows.id(r.row), r.ok ? "ok" : "error"};
    if (r.ok) {
      f.push_back(classes.at(r.label));
      f.push_back(fmt::format("{:.6f}", r.probs.at(r.label)));
      for (float p : r.probs) f.push_back(fmt::format("{:.6f}", p));
      f.push_back("");
    } else {
      f.push_back("");
      f.push_back("");
      for (std::size_t c = 0; c < classes.size(); ++c) f.push_back("");
      f.push_back(r.error);
    }
    out += csv_line(f) + "\n";
  }
  return out;
}

// The price is resolved before any work, so a bad table or instance name costs nothing.
std::optional<PriceOffer> resolve_offer(const ScoreOptions& o, PriceBasis basis) {
  if (o.prices.empty() && o.instance.empty()) return std::nullopt;
  if (o.prices.empty() || o.instance.empty()) throw UsageError("score: --prices FILE and --instance NAME go together");
  if (o.price_per_hour > 0) throw UsageError("score: give --price-per-hour or --prices/--instance, not both");
  PriceOffer offer = load_price_table(o.prices).find(o.instance);
  offer.per_hour(basis);  // UsageError now if the row has no spot price
  return offer;
}

// The out folder belongs to one job: same model weights, input, chunking and precision.
void claim_out_dir(const ScoreOptions& o, const json& job) {
  fs::create_directories(o.out_dir / "chunks");
  const fs::path job_file = o.out_dir / "score_job.json";
  std::error_code ec;
  if (fs::exists(job_file, ec)) {
    json existing;
    try {
      const std::string text = read_file(job_file);
      if (!json_nesting_exceeds(text)) existing = json::parse(text);  // too deep: another job, not printed
    } catch (const std::exception&) {
    }
    if (existing != job)
      throw UsageError("score: " + o.out_dir.string() + " holds another job (" + existing.dump() +
                       "); use another --out, or remove it to start over");
  } else {
    write_file_atomic(job_file, job.dump(2) + "\n");
  }
  remove_stale_temporaries(o.out_dir);
  remove_stale_temporaries(o.out_dir / "chunks");
}

// Reduced precision is checked against fp32 on the first real rows before the job runs in it.
json measure_drift(const ScoreOptions& o, Job& scorer, const ScoreRows& rows, int batch) {
  Timing scratch;
  const std::size_t sample = std::min<std::size_t>(rows.size(), static_cast<std::size_t>(o.drift_sample));
  const auto reduced = scorer.score_range(0, sample, batch, scratch);
  ScoreOptions fp32 = o;
  fp32.precision = "fp32";
  Job reference(fp32, load_exported_model(o.model_dir, o.variant, false), rows);
  const auto exact = reference.score_range(0, sample, batch, scratch);
  std::int64_t compared = 0, agree = 0;
  double max_diff = 0;
  for (std::size_t i = 0; i < reduced.size() && i < exact.size(); ++i) {
    if (!reduced[i].ok || !exact[i].ok) continue;
    ++compared;
    agree += reduced[i].label == exact[i].label;
    for (std::size_t c = 0; c < reduced[i].probs.size(); ++c)
      max_diff = std::max(max_diff, static_cast<double>(std::abs(reduced[i].probs[c] - exact[i].probs[c])));
  }
  const double agreement = compared ? static_cast<double>(agree) / compared : 1.0;
  spdlog::info("score: {} vs fp32 on {} rows: top-1 agreement {:.4f}, largest probability difference {:.2e}", o.precision,
               compared, agreement, max_diff);
  return {{"rows_compared", compared}, {"top1_agreement", agreement}, {"max_prob_diff", max_diff}};
}

struct ChunkCounts {
  std::size_t reused = 0, written = 0;
};

// Scores every chunk not already on disk; each chunk file is written atomically, so present means complete.
ChunkCounts score_chunks(const ScoreOptions& o, Job& scorer, const ScoreRows& rows, int batch, Timing& timing) {
  const std::size_t n = rows.size();
  const std::size_t n_chunks = (n + o.chunk_rows - 1) / o.chunk_rows;
  ChunkCounts counts;
  Progress progress("score", n, "img");
  std::error_code ec;
  for (std::size_t c = 0; c < n_chunks; ++c) {
    const fs::path file = o.out_dir / "chunks" / chunk_name(c);
    const std::size_t begin = c * o.chunk_rows, end = std::min(n, begin + o.chunk_rows);
    if (fs::exists(file, ec)) {
      ++counts.reused;
      progress.advance(end - begin);
      continue;
    }
    const auto results = scorer.score_range(begin, end, batch, timing);
    if (interrupt_requested() || results.size() != end - begin) {
      spdlog::warn("score: interrupted in chunk {}; {} chunks are done, rerun the same command to resume", c, c);
      throw InterruptedError();
    }
    try {
      write_file_atomic(file, chunk_csv(results, rows, scorer.class_names()));
    } catch (const IoError& e) {
      // Full disk or a file size limit: the temporary is gone, so no chunk looks complete.
      throw IoError(fmt::format("score: chunk {} of {} not saved: {}; the {} chunks before it are complete, free space "
                                "and rerun the same command to resume",
                                c, n_chunks, e.what(), c));
    }
    ++counts.written;
    progress.advance(end - begin);
  }
  progress.finish();
  return counts;
}

struct JoinedRows {
  std::size_t errors = 0;
  std::map<std::string, std::int64_t> error_reasons;  // first 80 bytes of the reason -> rows
};

// Every row exactly once, in order: the chunks are checked while they are joined into predictions.csv.
JoinedRows join_chunks(const ScoreOptions& o, const std::vector<std::string>& classes, std::size_t n) {
  const std::size_t n_chunks = (n + o.chunk_rows - 1) / o.chunk_rows;
  std::string all = csv_line(csv_header(classes)) + "\n";
  std::size_t expected_row = 0;
  JoinedRows joined;
  for (std::size_t c = 0; c < n_chunks; ++c) {
    const fs::path file = o.out_dir / "chunks" / chunk_name(c);
    const std::string text = read_file(file);
    for (const auto& rec : parse_csv(text)) {
      if (!rec.error.empty() || rec.fields.size() != classes.size() + 6 || rec.fields[0] != std::to_string(expected_row))
        throw DataError("score: " + file.string() + " line " + std::to_string(rec.line) + " is not row " +
                        std::to_string(expected_row) + "; remove the chunk and rerun");
      if (rec.fields[2] == "error") {
        ++joined.errors;
        const std::string& reason = rec.fields.back();
        joined.error_reasons[reason.substr(0, std::min<std::size_t>(reason.size(), 80))]++;
      }
      ++expected_row;
    }
    all += text;
  }
  if (expected_row != n)
    throw DataError("score: the chunks hold " + std::to_string(expected_row) + " rows, the input " + std::to_string(n));
  try {
    write_file_atomic(o.out_dir / "predictions.csv", all);
  } catch (const IoError& e) {
    throw IoError(fmt::format("score: predictions.csv not saved: {}; all {} chunks are complete, free space and rerun "
                              "the same command to join them",
                              e.what(), n_chunks));
  }
  return joined;
}

// Throughput, latency and queue figures of this run's scoring.
void add_timing(json& report, const Timing& timing, double compute_only) {
  const double images_per_second = timing.wall_seconds > 0 ? timing.images / timing.wall_seconds : 0.0;
  report["images_scored_this_run"] = timing.images;
  report["images_per_second"] = images_per_second;
  report["compute_images_per_second"] = timing.compute_seconds > 0 ? timing.images / timing.compute_seconds : 0.0;
  report["compute_only_images_per_second"] = compute_only;
  report["overlap_efficiency"] = compute_only > 0 ? images_per_second / compute_only : 0.0;
  report["batch_latency_ms"] = {{"p50", percentile(timing.batch_ms, 0.5)}, {"p95", percentile(timing.batch_ms, 0.95)},
                                {"p99", percentile(timing.batch_ms, 0.99)}, {"batches", timing.batch_ms.size()}};
  json sizes = json::object();
  for (const auto& [size, count] : timing.batch_sizes) sizes[std::to_string(size)] = count;
  report["batch_sizes"] = sizes;
  const double longest_queue =
      timing.queue_lengths.empty() ? 0.0 : *std::max_element(timing.queue_lengths.begin(), timing.queue_lengths.end());
  report["queue_length"] = {{"median", percentile(timing.queue_lengths, 0.5)}, {"max", longest_queue}};
}

void add_cost(json& report, const ScoreOptions& o, const std::optional<PriceOffer>& offer, PriceBasis basis,
              double images_per_second) {
  if (images_per_second <= 0) return;
  if (o.price_per_hour > 0)
    report["cost_per_million_images"] = cost_per_million_images(o.price_per_hour, images_per_second);
  if (!offer) return;
  // One job drives one device: an instance with N accelerators runs N such jobs side by side.
  const double per_device = offer->per_hour(basis) / offer->devices();
  const std::string measured_on = wants_cuda(o.device) ? "gpu" : "cpu";
  report["cost_per_million_images"] = cost_per_million_images(per_device, images_per_second);
  report["cost"] = {{"instance", offer->name}, {"basis", to_string(basis)}, {"price_per_hour", offer->per_hour(basis)},
                    {"devices_per_instance", offer->devices()}, {"price_per_device_hour", per_device},
                    {"measured_on", measured_on}, {"offer_kind", offer->kind}, {"source", offer->source},
                    {"date", offer->date}, {"prices", o.prices.string()}};
  if (measured_on != offer->kind)
    spdlog::warn("score: throughput measured on {} but priced as {} ({}): the cost assumes this rate there", measured_on,
                 offer->name, offer->kind);
  spdlog::info("score: {:.4f} per million images on {} ({}, {:.4f}/h per device; prices of {} from {})",
               report["cost_per_million_images"].get<double>(), offer->name, to_string(basis), per_device, offer->date,
               offer->source);
}

}  // namespace

json run_score_job(const ScoreOptions& o) {
  const auto job_start = Clock::now();
  if (o.out_dir.empty()) throw UsageError("score: --out OUT_DIR is required");
  if (o.chunk_rows < 1 || o.batch_size < 1 || o.max_batch < 1)
    throw UsageError("score: --chunk-rows, --batch-size and --max-batch must be >= 1");
  const PriceBasis basis = parse_price_basis(o.price_basis);
  const std::optional<PriceOffer> offer = resolve_offer(o, basis);
  LoadedModel loaded = load_exported_model(o.model_dir, o.variant, /*verify=*/true);
  const auto rows = open_score_rows(o.input, o.split, loaded.card.at("preprocessing").at("resize_short_side").get<int>());
  const std::size_t n = rows->size();
  claim_out_dir(o, {{"model_weights_crc32", loaded.card.at("fingerprint").at("weights_crc32")},
                    {"variant", o.variant},
                    {"precision", o.precision},
                    {"input", rows->describe()},
                    {"rows", n},
                    {"chunk_rows", o.chunk_rows}});

  Job scorer(o, std::move(loaded), *rows);
  json report = {{"rows", n}, {"chunks", (n + o.chunk_rows - 1) / o.chunk_rows}, {"model", o.model_dir.string()},
                 {"input", rows->describe()}, {"precision", o.precision}, {"variant", o.variant},
                 {"device", wants_cuda(o.device) ? "cuda" : "cpu"}, {"threads", at::get_num_threads()},
                 {"workers", o.workers > 0 ? o.workers : usable_cores()}, {"commit", build_commit()},
                 {"torch", torch_version()}};
  int batch = o.batch_size;
  if (o.max_latency_ms > 0) {
    report["latency_curve"] = scorer.choose_batch(o.max_latency_ms, o.max_batch, batch);
    spdlog::info("score: batch {} is the largest whose measured p95 fits {} ms", batch, o.max_latency_ms);
  }
  report["batch_size"] = batch;
  // What the device does alone: end-to-end throughput is judged against it (overlap_efficiency).
  const double compute_only = batch / (percentile(scorer.time_compute(batch, 7), 0.5) / 1e3);
  if (scorer.precision() != Precision::kFp32 && o.drift_sample > 0) report["drift"] = measure_drift(o, scorer, *rows, batch);

  Timing timing;
  const ChunkCounts chunks = score_chunks(o, scorer, *rows, batch, timing);
  const JoinedRows joined = join_chunks(o, scorer.class_names(), n);
  report["rows_ok"] = n - joined.errors;
  report["rows_error"] = joined.errors;
  report["error_reasons"] = joined.error_reasons;
  report["chunks_reused"] = chunks.reused;
  report["chunks_written"] = chunks.written;
  add_timing(report, timing, compute_only);
  const double images_per_second = report["images_per_second"].get<double>();
  add_cost(report, o, offer, basis, images_per_second);
  report["wall_seconds"] = seconds_since(job_start);
  write_file_atomic(o.out_dir / "report.json", report.dump(2) + "\n");
  spdlog::info("score: {} rows ({} errors) -> {}; {:.1f} images/s, batch p95 {:.1f} ms{}", n, joined.errors,
               (o.out_dir / "predictions.csv").string(), images_per_second, percentile(timing.batch_ms, 0.95),
               chunks.reused ? fmt::format(", {} chunks reused from an earlier run", chunks.reused) : "");
  return report;
}

}  // namespace shoplens
