// The training-step benchmark behind `shoplens bench-train`: the trainer's real step (forward,
// loss, backward, optimizer step) on synthetic tensors, so the figure is the compute path only
// and can be compared with Python PyTorch eager running the same model, batch, dtype and thread
// count (scripts/bench/train_step.sh and, for text models, text_step.sh run both side by side).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "shoplens/bench/bench_results.h"
#include "shoplens/bench/synthetic_workload.h"

namespace shoplens {

struct TrainBenchOptions : SyntheticWorkload {
  int batch_size = 32;
  int threads = 0;  // 0: all usable cores
  int warmup_steps = 3;
  int steps = 10;
  std::uint64_t seed = 1;
  // Under a launcher (WORLD_SIZE > 1): the step with the data-parallel gradient all-reduce.
  double bucket_mb = 25;
  bool overlap = true;  // false: all buckets after backward (the no-overlap baseline)
};

struct TrainBenchResult {
  TrainBenchOptions options;
  int threads = 1;
  std::vector<double> step_seconds;  // measured steps only
  double median_step_seconds = 0;
  double p95_step_seconds = 0;
  double images_per_second = 0;  // samples: batch x world size / median step time
  bool text = false;
  double tokens_per_second = 0;  // text: samples/s x seq_len (every token real); 0 for images
  int world_size = 1;
  std::int64_t buckets = 0;
  std::int64_t gradient_bytes = 0;      // all-reduced per step
  double median_comm_wait_seconds = 0;  // per step, communication not hidden behind backward
  std::uint64_t peak_rss_bytes = 0;
  BenchEnvironment environment;  // host_environment()
  std::string device;            // "cuda" or "cpu": where the steps ran
  std::string optimizer_impl;    // the optimizer implementation that stepped (auto resolved)
};

TrainBenchResult run_train_bench(const TrainBenchOptions& options);

// Every parameter and the environment travel with the figures.
std::vector<std::pair<std::string, std::string>> train_bench_fields(const TrainBenchResult& result);
std::string train_bench_table(const TrainBenchResult& result);
std::string train_bench_csv(const TrainBenchResult& result);
std::string train_bench_json(const TrainBenchResult& result);

}  // namespace shoplens
