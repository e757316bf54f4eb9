// The batch layer's section of the run configuration: how find-batch searches and what plan it
// makes (docs/FIND_BATCH.md). Schema rows: src/core/config.cpp.
#pragma once

#include <cstdint>
#include <string>

#include "shoplens/core/enum_names.h"

namespace shoplens {

// fit: memory model + verification; binsearch: Lightning's; exact: benchmark truth (slow).
enum class SearchStrategy { kFit, kBinsearch, kExact };
inline constexpr EnumName<SearchStrategy> kSearchStrategyNames[] = {
    {SearchStrategy::kFit, "fit"}, {SearchStrategy::kBinsearch, "binsearch"}, {SearchStrategy::kExact, "exact"}};

// The learning-rate rule for a new global batch; auto: sqrt for adamw, linear for sgd.
enum class LrScaling { kAuto, kLinear, kSqrt, kNone };
inline constexpr EnumName<LrScaling> kLrScalingNames[] = {
    {LrScaling::kAuto, "auto"}, {LrScaling::kLinear, "linear"}, {LrScaling::kSqrt, "sqrt"}, {LrScaling::kNone, "none"}};

// throughput: the knee of images/s; memory: the largest micro-batch that fits.
enum class BatchObjective { kThroughput, kMemory };
inline constexpr EnumName<BatchObjective> kBatchObjectiveNames[] = {{BatchObjective::kThroughput, "throughput"},
                                                                    {BatchObjective::kMemory, "memory"}};

// time: epochs x the plan's measured speed-up (about the reference batch's wall time); epochs:
// train.epochs as given.
enum class TrainBudget { kTime, kEpochs };
inline constexpr EnumName<TrainBudget> kTrainBudgetNames[] = {{TrainBudget::kTime, "time"},
                                                              {TrainBudget::kEpochs, "epochs"}};

struct FindBatchConfig {
  SearchStrategy strategy = SearchStrategy::kFit;
  double headroom = 0.02;  // fraction of the budget always left free (fit)
  int probe_steps = 3;     // training steps per probe (steady state)
  int verify_steps = 3;    // steps the answer must run within the budget
  int first_batch = 2;
  int max_batch = 4096;
  int round_to = 0;                      // multiple to round down to (0: 8 on CUDA with bf16/fp16, else 1)
  std::int64_t target_global_batch = 0;  // 0: one micro-batch per rank and step
  LrScaling lr_scaling = LrScaling::kAuto;
  BatchObjective objective = BatchObjective::kThroughput;
  double min_throughput_gain = 0.2;  // objective throughput: images/s a batch doubling must add to be taken
  // objective throughput: the share of the loader's rate measured alone that the plan counts on
  // beside training (an H100 run kept 0.77-0.88 of it with as many workers as cores).
  double input_rate_share = 0.8;
  TrainBudget train_budget = TrainBudget::kTime;
  std::int64_t reference_batch = 0;  // global batch optim.lr was tuned for (0: loader.batch_size x accumulation)
  bool cache = true;
  std::string cache_dir;  // empty: $XDG_CACHE_HOME/shoplens, else ~/.cache/shoplens
  // CPU with train.memory_budget: the answer is probed again in a fresh process and lowered until
  // the whole process fits the budget, not only its tensors (docs/FIND_BATCH.md, "The process").
  bool process_check = true;
  int process_steps = 10;          // steps of each fresh-process probe (the heap's free blocks settle over steps)
  double process_headroom = 0.15;  // fraction of the budget kept for what a real epoch adds to a probe's process
};

}  // namespace shoplens
