// The optimizer of a run: AdamW or SGD over four parameter groups (backbone/head x decay/no
// decay). Norm weights, biases and ViT's cls_token/pos_embed never get weight decay; the
// backbone's learning rate is lr x backbone_lr_scale (discriminative fine-tuning). The step runs
// as optim.implementation says: fused, foreach (multi-tensor) or LibTorch's reference loop, all with
// LibTorch's state layout, so checkpoints move freely between them.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "shoplens/core/config.h"

namespace torch::optim {
class Optimizer;
}

namespace shoplens {

class Classifier;

struct ParamGroupInfo {
  std::string name;  // "backbone", "backbone_no_decay", "head", "head_no_decay"
  double base_lr = 0;
  double weight_decay = 0;
  std::vector<std::string> parameter_names;
};

class OptimizerSetup {
 public:
  OptimizerSetup(Classifier& model, const OptimConfig& config);
  ~OptimizerSetup();
  torch::optim::Optimizer& optimizer() { return *optimizer_; }
  const std::vector<ParamGroupInfo>& groups() const { return groups_; }
  // Sets every group's learning rate to its base x factor (the schedule's value for this step).
  void set_lr_factor(double factor);
  double head_lr() const;  // the current head learning rate, for logs
  // The implementation that steps (auto resolved) and a phrase for the run log, e.g.
  // "adamw, fused step over 4 parameter groups".
  OptimizerImpl implementation() const { return implementation_; }
  std::string description() const;
  // The optimizer step left undone on the device where `found_inf` is set, so that nothing is
  // read back to decide it (TrainStepOptions::device_skip). Empty unless the fused kernels step.
  std::function<void(const at::Tensor& found_inf)> device_skip_step();

 private:
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::vector<ParamGroupInfo> groups_;
  OptimizerKind kind_ = OptimizerKind::kAdamW;
  OptimizerImpl implementation_ = OptimizerImpl::kReference;
};

// The step to give TrainStepOptions::device_skip, or none: the fused optimizer's on CUDA, where
// skipping a non-finite step without reading its outcome keeps the device's queue full. None on
// the CPU (a read costs nothing there and keeps the divergence check exact per step) or with EMA
// (its update follows each step's outcome, read on the host).
std::function<void(const at::Tensor& found_inf)> device_skip_for(OptimizerSetup& optim, bool cuda, bool ema);

// True for parameters that must not be decayed (biases, norm weights, ViT tokens).
bool exempt_from_weight_decay(const std::string& name, long dims);

}  // namespace shoplens
