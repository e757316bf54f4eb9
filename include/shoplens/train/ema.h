// An exponential moving average of a model's weights (timm's ModelEmaV2, train.ema_decay): after
// every applied optimizer step, ema = d * ema + (1 - d) * weights for each parameter, and each
// buffer (BatchNorm statistics) is copied. d warms up as TensorFlow's ExponentialMovingAverage
// does with num_updates, min(decay, (1 + n) / (10 + n)) after n earlier steps: 0.1 at the first,
// 0.99 by the 891st, so a short run's average is not mostly its random initial weights (at decay
// 0.999 a 500-step run would otherwise keep 61% of them). The trainer evaluates with it, keeps it in
// checkpoints beside the raw weights, and export can ship it (docs/TRAINING.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace shoplens {

class Classifier;

class WeightsEma {
 public:
  // Starts as a copy of the model's parameters and buffers, on their device. decay in [0, 1).
  WeightsEma(const Classifier& model, double decay);

  double decay() const { return decay_; }
  // The decay used after `steps_before` earlier optimizer steps (the warm-up above).
  double decay_at(std::int64_t steps_before) const;
  // Folds the model's current weights in, after `steps_before` earlier optimizer steps.
  void update(const Classifier& model, std::int64_t steps_before);
  // Exchanges the model's weights with the averaged ones; a second call swaps them back.
  void swap_with(Classifier& model);

  // Parameters then buffers, named as the model's named_parameters / named_buffers name them.
  const std::vector<std::string>& names() const { return names_; }
  const std::vector<at::Tensor>& tensors() const { return tensors_; }
  bool is_buffer(std::size_t index) const { return index >= parameter_count_; }
  // For restoring: same order as names().
  std::vector<at::Tensor>& mutable_tensors() { return tensors_; }

 private:
  double decay_;
  std::size_t parameter_count_ = 0;  // the first tensors are parameters, the rest buffers
  std::vector<std::string> names_;
  std::vector<at::Tensor> tensors_;
  const Classifier* source_ = nullptr;  // the model update() last read, and its tensors in our order
  std::vector<at::Tensor> source_tensors_;
};

// The EMA weights in the model for one scope (evaluation, the test split), the raw ones after it.
// A null EMA does nothing.
class EmaInModel {
 public:
  EmaInModel(WeightsEma* ema, Classifier& model);
  ~EmaInModel();
  EmaInModel(const EmaInModel&) = delete;
  EmaInModel& operator=(const EmaInModel&) = delete;

 private:
  WeightsEma* ema_;
  Classifier& model_;
};

}  // namespace shoplens
