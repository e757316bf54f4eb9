#include "shoplens/bench/train_bench.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "shoplens/bench/synthetic_step.h"
#include "shoplens/core/config.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/runtime.h"
#include "shoplens/core/stats.h"
#include "shoplens/dist/dist_env.h"
#include "shoplens/dist/gradient_reducer.h"
#include "shoplens/dist/process_group.h"
#include "shoplens/models/classifier.h"
#include "shoplens/train/optimizer.h"
#include "shoplens/train/train_step.h"

namespace shoplens {

namespace {

// Under a launcher (WORLD_SIZE > 1): the process group and the bucketed gradient all-reduce the
// step runs with, from rank 0's weights.
struct DataParallel {
  std::shared_ptr<ProcessGroup> group;
  std::unique_ptr<GradientReducer> reducer;

  void join(const DistEnv& env, const TrainBenchOptions& o, bool cuda, Classifier& model, TrainStepOptions& step) {
    GroupOptions group_options;
    group_options.backend = cuda ? "nccl" : "gloo";
    group_options.fingerprint = o.model + "/" + std::to_string(o.batch_size);
    group = join_process_group(env, group_options);
    std::vector<at::Tensor> params = model.parameters();
    std::vector<at::Tensor> flat;
    flat.reserve(params.size());
    for (const auto& p : params) flat.push_back(p.detach());
    group->broadcast(flat, 0);
    reducer = std::make_unique<GradientReducer>(group, params, static_cast<std::int64_t>(o.bucket_mb * 1024 * 1024));
    reducer->set_overlap(o.overlap);
    step.reducer = reducer.get();
    step.group = group.get();
  }
};

// Timing step: o.steps steps, each timed alone, and what they measured.
void time_each_step(TrainStep& step, const std::vector<Batch>& micro, const TrainBenchOptions& o,
                    const GradientReducer* reducer, TrainBenchResult& result) {
  std::vector<double> comm_waits;
  for (int i = 0; i < o.steps; ++i) {
    const double wait_before = reducer ? reducer->stats().wait_seconds : 0.0;
    const auto t0 = std::chrono::steady_clock::now();
    step.run(micro);  // reads the loss back, so the step has finished when this returns
    result.step_seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (reducer) comm_waits.push_back(reducer->stats().wait_seconds - wait_before);
  }
  if (reducer) result.median_comm_wait_seconds = percentile(comm_waits, 0.5);
  result.median_step_seconds = percentile(result.step_seconds, 0.5);
  result.p95_step_seconds = percentile(result.step_seconds, 0.95);
  result.images_per_second = static_cast<double>(o.batch_size) * result.world_size / result.median_step_seconds;
}

// Waits until the device has run everything queued (nothing to wait for on the CPU).
void finish_device_work(bool cuda) {
  if (cuda) torch::cuda::synchronize();
}

// Timing window: o.steps steps queued back to back, nothing read between them, timed until the
// device has finished the last.
void time_window(TrainStep& step, const std::vector<Batch>& micro, const TrainBenchOptions& o, bool cuda,
                 const GradientReducer* reducer, TrainBenchResult& result) {
  finish_device_work(cuda);  // the warm-up's queued work is not the window's
  const double wait_before = reducer ? reducer->stats().wait_seconds : 0.0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < o.steps; ++i) step.run(micro);
  finish_device_work(cuda);
  result.window_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (reducer) result.median_comm_wait_seconds = (reducer->stats().wait_seconds - wait_before) / o.steps;
  result.images_per_second =
      static_cast<double>(o.batch_size) * result.world_size * o.steps / std::max(result.window_seconds, 1e-12);
}

// The warm-up, then o.steps timed steps as o.timing says, and what they measured.
void time_steps(TrainStep& step, const Batch& batch, const TrainBenchOptions& o, bool cuda,
                const GradientReducer* reducer, TrainBenchResult& result) {
  const std::vector<Batch> micro{batch};
  for (int i = 0; i < o.warmup_steps; ++i) step.run(micro);
  if (o.timing == BenchTiming::kWindow)
    time_window(step, micro, o, cuda, reducer, result);
  else
    time_each_step(step, micro, o, reducer, result);
  if (reducer) {
    result.buckets = reducer->stats().buckets;
    result.gradient_bytes = reducer->stats().bytes_per_step;
  }
  if (result.text) result.tokens_per_second = result.images_per_second * o.seq_len;
}

}  // namespace

TrainBenchResult run_train_bench(const TrainBenchOptions& o) {
  if (o.batch_size < 1 || o.image_size < 8 || o.steps < 1 || o.warmup_steps < 0)
    throw UsageError("bench-train: batch >= 1, image size >= 8, steps >= 1 and warm-up >= 0 are required");
  if (is_text_model(o.model) && (o.seq_len < 1 || o.vocab_size < 3))
    throw UsageError("bench-train: --seq-len >= 1 and --vocab-size >= 3 are required for " + o.model);
  TrainBenchResult result;
  result.options = o;
  result.threads = resolve_threads(o.threads);
  set_compute_threads(result.threads);
  const bool cuda = cuda_available();
  seed_torch(o.seed);

  const DistEnv env = dist_env_from_process();
  std::unique_ptr<SyntheticJob> job;  // declared first: the reducer's hooks go before the model
  DataParallel parallel;
  job = std::make_unique<SyntheticJob>(SyntheticJobOptions{o, cuda},
                                       [&](Classifier& model, TrainStepOptions& step_options) {
                                         // window: the trainer's step, its loss left on the device
                                         step_options.defer_host_reads = o.timing == BenchTiming::kWindow;
                                         if (!env.distributed()) return;
                                         parallel.join(env, o, cuda, model, step_options);
                                         result.world_size = parallel.group->world_size();
                                       });
  result.text = job->is_text();
  if (o.timing == BenchTiming::kWindow)  // and, where the trainer's would, its optimizer skipping on the device
    if (auto skip = device_skip_for(*job->optim, cuda, /*ema=*/false)) job->step->set_device_skip(std::move(skip));
  time_steps(*job->step, job->batch(o.batch_size), o, cuda, parallel.reducer.get(), result);
  result.peak_rss_bytes = peak_rss_bytes();
  result.environment = host_environment();
  result.device = cuda ? "cuda" : "cpu";
  result.optimizer_impl = name_in(kOptimizerImplNames, job->optim->implementation());
  return result;
}

std::vector<std::pair<std::string, std::string>> train_bench_fields(const TrainBenchResult& r) {
  const auto& o = r.options;
  auto num = [](double v) {
    std::ostringstream os;
    os.precision(6);
    os << v;
    return os.str();
  };
  std::vector<std::pair<std::string, std::string>> fields = {
      {"implementation", "shoplens"},
      {"model", o.model},
      {"batch_size", std::to_string(o.batch_size)},
      {"image_size", std::to_string(o.image_size)},
      {"num_classes", std::to_string(o.num_classes)},
      {"precision", precision_name(o.precision)},
      {"channels_last", o.channels_last ? "true" : "false"},
      {"optimizer", name_in(kOptimizerKindNames, o.optimizer)},
      {"optimizer_impl", r.optimizer_impl},
      {"threads", std::to_string(r.threads)},
      {"warmup_steps", std::to_string(o.warmup_steps)},
      {"steps", std::to_string(o.steps)},
      {"timing", name_in(kBenchTimingNames, o.timing)},
      {"median_step_ms", num(r.median_step_seconds * 1e3)},
      {"p95_step_ms", num(r.p95_step_seconds * 1e3)},
      {"images_per_second", num(r.images_per_second)},
      {"peak_rss_bytes", std::to_string(r.peak_rss_bytes)},
      {"world_size", std::to_string(r.world_size)},
      {"bucket_mb", num(o.bucket_mb)},
      {"overlap", o.overlap ? "true" : "false"},
      {"buckets", std::to_string(r.buckets)},
      {"gradient_bytes", std::to_string(r.gradient_bytes)},
      {"median_comm_wait_ms", num(r.median_comm_wait_seconds * 1e3)},
      {"device", r.device},
      {"cpu", r.environment.cpu_model},
      {"torch", r.environment.torch_version},
      {"commit", r.environment.commit},
      {"date", r.environment.date}};
  const auto named = [&](const char* key) {
    return std::find_if(fields.begin(), fields.end(), [&](const auto& f) { return f.first == key; });
  };
  if (o.timing == BenchTiming::kWindow) {  // one window, no per-step figures: its mean step instead
    fields.erase(named("p95_step_ms"));
    const auto at = fields.erase(named("median_step_ms"));
    fields.insert(at,
                  {{"mean_step_ms", num(r.window_seconds * 1e3 / o.steps)}, {"window_seconds", num(r.window_seconds)}});
  }
  if (r.text) {
    // A text workload has no images: samples/s in images/s's place, then the token figures, and no
    // image size (--image-size does not apply to it).
    const auto at = fields.erase(named("images_per_second"));
    fields.insert(at, {{"samples_per_second", num(r.images_per_second)},
                       {"seq_len", std::to_string(o.seq_len)},
                       {"vocab_size", std::to_string(o.vocab_size)},
                       {"tokens_per_second", num(r.tokens_per_second)}});
    fields.erase(named("image_size"));
  }
  return fields;
}

std::string train_bench_table(const TrainBenchResult& r) {
  std::ostringstream os;
  for (const auto& [k, v] : train_bench_fields(r))
    os << k << std::string(k.size() < 18 ? 18 - k.size() : 1, ' ') << v << "\n";
  return os.str();
}

std::string train_bench_csv(const TrainBenchResult& r) {
  std::ostringstream head, row;
  bool first = true;
  for (const auto& [k, v] : train_bench_fields(r)) {
    head << (first ? "" : ",") << k;
    row << (first ? "" : ",") << (v.find(',') != std::string::npos ? "\"" + v + "\"" : v);
    first = false;
  }
  return head.str() + "\n" + row.str() + "\n";
}

std::string train_bench_json(const TrainBenchResult& r) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : train_bench_fields(r)) j[k] = v;
  for (const char* k :
       {"batch_size", "image_size", "num_classes", "threads", "warmup_steps", "steps", "world_size", "buckets"})
    if (j.contains(k)) j[k] = std::stoi(j[k].get<std::string>());
  for (const char* k : {"median_step_ms", "p95_step_ms", "mean_step_ms", "window_seconds", "images_per_second",
                        "bucket_mb", "median_comm_wait_ms"})
    if (j.contains(k)) j[k] = std::stod(j[k].get<std::string>());
  if (r.text) {
    for (const char* k : {"seq_len", "vocab_size"}) j[k] = std::stoi(j[k].get<std::string>());
    for (const char* k : {"samples_per_second", "tokens_per_second"}) j[k] = std::stod(j[k].get<std::string>());
  }
  j["gradient_bytes"] = std::stoll(j["gradient_bytes"].get<std::string>());
  j["overlap"] = r.options.overlap;
  j["peak_rss_bytes"] = std::stoull(j["peak_rss_bytes"].get<std::string>());
  j["channels_last"] = r.options.channels_last;
  j["step_seconds"] = r.step_seconds;
  return j.dump() + "\n";
}

}  // namespace shoplens
