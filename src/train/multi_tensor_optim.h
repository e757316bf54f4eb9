// Multi-tensor AdamW and SGD (optim.implementation, docs/TRAINING.md): LibTorch's own optimizers
// with step() replaced. Options, state (step counts, moments, momentum buffers) and save/load stay
// LibTorch's, so a checkpoint written under one implementation resumes under any other. Each
// parameter group's parameters are bucketed by device, dtype and step count and updated with
// at::_foreach_* ops (a handful of launches per bucket instead of a handful per parameter), or on
// LibTorch >= 2.4 with the fused kernels (one launch per bucket). The formulas are LibTorch's and
// PyTorch's: decoupled weight decay for AdamW; L2 weight decay, momentum with dampening, Nesterov
// and a first momentum buffer equal to the gradient for SGD. Parameters without a gradient (frozen)
// are skipped and keep their state, exactly as in the reference loop.
#pragma once

#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <string>
#include <vector>

namespace shoplens {

enum class StepKernel { kForeach, kFused };

class MultiTensorAdamW : public torch::optim::AdamW {
 public:
  MultiTensorAdamW(std::vector<torch::optim::OptimizerParamGroup> groups, torch::optim::AdamWOptions defaults,
                   StepKernel kernel);
  torch::Tensor step(LossClosure closure = nullptr) override;

 private:
  StepKernel kernel_;
};

class MultiTensorSgd : public torch::optim::SGD {
 public:
  MultiTensorSgd(std::vector<torch::optim::OptimizerParamGroup> groups, torch::optim::SGDOptions defaults,
                 StepKernel kernel);
  torch::Tensor step(LossClosure closure = nullptr) override;

 private:
  StepKernel kernel_;
};

// Whether this LibTorch build has fused AdamW/SGD kernels for tensors of `dtype` on `device`;
// when not, `why` says why (for the error that names optim.implementation).
bool fused_optimizer_available(const c10::Device& device, c10::ScalarType dtype, std::string* why = nullptr);

}  // namespace shoplens
