// What a checkpoint holds besides the file format: the trainer's counters and history (JSON) and
// the tensors (model, optimizer, RNG) as one LibTorch archive, and how to restore them.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shoplens/core/config.h"
#include "shoplens/train/checkpoint.h"

namespace torch::optim {
class Optimizer;
}

namespace shoplens {

class Classifier;
class LossScaler;
class WeightsEma;

constexpr int kCheckpointFormat = 1;

struct TrainState {
  std::int64_t step = 0;           // optimizer steps done
  std::int64_t epoch = 0;          // the epoch in progress
  std::int64_t epoch_samples = 0;  // samples of that epoch already consumed, over every rank
  std::int64_t global_batch = 0;   // micro-batch x accumulation x world size when saved
  int world_size = 1;
  std::int64_t images_trained = 0;
  double train_seconds = 0;
  double train_seconds_at_save = 0;
  std::string best_metric = "macro_f1";
  double best_value = std::numeric_limits<double>::quiet_NaN();
  std::optional<std::int64_t> best_step;
  int evals_without_improvement = 0;
  int bad_steps = 0;  // consecutive non-finite steps
  double last_finite_loss = std::numeric_limits<double>::quiet_NaN();
  std::int64_t last_finite_step = 0;
  std::vector<nlohmann::json> history;  // every validation record
  int micro_split = 0;                  // after an OOM: loader batches run as micro-batches of this (0: whole)
  std::int64_t oom_retries = 0;         // steps retried smaller after running out of memory
};

nlohmann::json state_to_json(const TrainState& state, const Config& config, const Classifier& model,
                             const std::vector<std::string>& class_names, const LossScaler& scaler);
// Model parameters and buffers, optimizer state and the CPU RNG state; with `ema`, its weights too
// (as "ema.<name>").
std::string serialize_tensors(const Classifier& model, const torch::optim::Optimizer& optimizer,
                              const WeightsEma* ema = nullptr);

// Restores everything; ConfigError when the checkpoint was made for another model or classes.
// With `ema`: its weights from the checkpoint, or (a checkpoint saved without EMA) the model's.
void restore_state(const Checkpoint& checkpoint, const Config& config, Classifier& model,
                   const std::vector<std::string>& class_names, torch::optim::Optimizer& optimizer, LossScaler& scaler,
                   TrainState& state, WeightsEma* ema = nullptr);

// Which weights of a checkpoint to load: the trained ones, the EMA (DataError when the checkpoint
// has none), or the EMA when there is one.
enum class CheckpointWeights { kRaw, kEma, kEmaIfPresent };
// Only the model weights (the test split with the best checkpoint, export). Returns whether the
// EMA weights were loaded.
bool restore_model_weights(Classifier& model, const std::string& tensors,
                           CheckpointWeights which = CheckpointWeights::kRaw);

}  // namespace shoplens
