#include "shoplens/bench/train_bench.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <sstream>

#include <nlohmann/json.hpp>

#include "shoplens/core/config.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/runtime.h"
#include "shoplens/core/stats.h"
#include "shoplens/models/classifier.h"
#include "shoplens/train/optimizer.h"
#include "shoplens/train/train_step.h"

namespace shoplens {

TrainBenchResult run_train_bench(const TrainBenchOptions& o) {
  if (o.batch_size < 1 || o.image_size < 8 || o.steps < 1 || o.warmup_steps < 0)
    throw UsageError("bench-train: batch >= 1, image size >= 8, steps >= 1 and warm-up >= 0 are required");
  TrainBenchResult result;
  result.options = o;
  result.threads = resolve_threads(o.threads);
  set_compute_threads(result.threads);
  const bool cuda = cuda_available();
  seed_torch(o.seed);

  ModelSpec spec{o.model, o.num_classes, o.image_size, 0.0, o.channels_last};
  auto model = make_model(spec);
  const auto device = cuda ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
  model->to(device);
  OptimConfig optim_config;
  optim_config.name = o.optimizer;
  OptimizerSetup optim(*model, optim_config);
  TrainStepOptions step_options;
  step_options.precision = parse_precision(o.precision);
  step_options.cuda = cuda;
  step_options.scaler.enabled = step_options.precision == Precision::kFp16;
  TrainStep step(*model, optim.optimizer(), step_options);

  Batch batch;
  batch.images = torch::randn({o.batch_size, 3, o.image_size, o.image_size});
  batch.labels = torch::randint(o.num_classes, {o.batch_size}, torch::kLong);
  if (cuda) {
    batch.images = batch.images.to(device);
    batch.labels = batch.labels.to(device);
  }
  const std::vector<Batch> micro{batch};
  for (int i = 0; i < o.warmup_steps; ++i) step.run(micro);
  for (int i = 0; i < o.steps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    step.run(micro);  // reads the loss back, so the step has finished when this returns
    result.step_seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  result.median_step_seconds = percentile(result.step_seconds, 0.5);
  result.p95_step_seconds = percentile(result.step_seconds, 0.95);
  result.images_per_second = o.batch_size / result.median_step_seconds;
  result.peak_rss_bytes = peak_rss_bytes();
  result.commit = build_commit();
  result.cpu = cpu_model();
  result.torch_version = torch_version();
  result.device = cuda ? "cuda" : "cpu";
  result.date = today_date();
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
  return {{"implementation", "shoplens"}, {"model", o.model}, {"batch_size", std::to_string(o.batch_size)},
          {"image_size", std::to_string(o.image_size)}, {"num_classes", std::to_string(o.num_classes)},
          {"precision", o.precision}, {"channels_last", o.channels_last ? "true" : "false"},
          {"optimizer", o.optimizer}, {"threads", std::to_string(r.threads)},
          {"warmup_steps", std::to_string(o.warmup_steps)}, {"steps", std::to_string(o.steps)},
          {"median_step_ms", num(r.median_step_seconds * 1e3)}, {"p95_step_ms", num(r.p95_step_seconds * 1e3)},
          {"images_per_second", num(r.images_per_second)}, {"peak_rss_bytes", std::to_string(r.peak_rss_bytes)},
          {"device", r.device}, {"cpu", r.cpu}, {"torch", r.torch_version}, {"commit", r.commit}, {"date", r.date}};
}

std::string train_bench_table(const TrainBenchResult& r) {
  std::ostringstream os;
  for (const auto& [k, v] : train_bench_fields(r)) os << k << std::string(k.size() < 18 ? 18 - k.size() : 1, ' ') << v << "\n";
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
  for (const char* k : {"batch_size", "image_size", "num_classes", "threads", "warmup_steps", "steps"}) j[k] = std::stoi(j[k].get<std::string>());
  for (const char* k : {"median_step_ms", "p95_step_ms", "images_per_second"}) j[k] = std::stod(j[k].get<std::string>());
  j["peak_rss_bytes"] = std::stoull(j["peak_rss_bytes"].get<std::string>());
  j["channels_last"] = r.options.channels_last;
  j["step_seconds"] = r.step_seconds;
  return j.dump() + "\n";
}

}  // namespace shoplens
