// An exponential moving average of a model's weights (timm's ModelEmaV2, train.ema_decay): after
// every applied optimizer step, ema = decay * ema + (1 - decay) * weights for each parameter, and
// each buffer (BatchNorm statistics) is copied. The trainer evaluates with it, keeps it in
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
  // Folds the model's current weights in.
  void update(const Classifier& model);
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
