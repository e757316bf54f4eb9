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
#include "shoplens/core/enum_names.h"

namespace shoplens {

// How bench-train times its steps (docs/BENCH.md).
// - step: each step reads its loss back, so it has finished when it returns, and is timed alone;
//   the figure is the median step. The step's latency.
// - window: the trainer's own step (the loss kept on the device; on CUDA the fused optimizer skips
//   a non-finite step there), the --steps steps timed as one window that ends when the device has
//   finished; the figure is the window's mean step. The throughput of a training run: on a GPU the
//   host queues step N+1 while the device runs step N.
enum class BenchTiming { kStep, kWindow };
inline constexpr EnumName<BenchTiming> kBenchTimingNames[] = {{BenchTiming::kStep, "step"},
                                                              {BenchTiming::kWindow, "window"}};

struct TrainBenchOptions : SyntheticWorkload {
  int batch_size = 32;
  int threads = 0;  // 0: all usable cores
  int warmup_steps = 3;
  int steps = 10;
  std::uint64_t seed = 1;
  // Under a launcher (WORLD_SIZE > 1): the step with the data-parallel gradient all-reduce.
  double bucket_mb = 25;
  bool overlap = true;  // false: all buckets after backward (the no-overlap baseline)
  BenchTiming timing = BenchTiming::kStep;
};

struct TrainBenchResult {
  TrainBenchOptions options;
  int threads = 1;
  std::vector<double> step_seconds;  // timing step: each measured step; window: empty
  double median_step_seconds = 0;    // timing step
  double p95_step_seconds = 0;       // timing step
  double window_seconds = 0;         // timing window: the measured steps, until the device finished
  double images_per_second = 0;      // samples: batch x world size / (median or mean) step time
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
