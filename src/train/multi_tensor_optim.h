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
#include <utility>
#include <vector>

namespace shoplens {

enum class StepKernel { kForeach, kFused };

// `Base` (torch::optim::AdamW or SGD) with its step() replaced; everything else is Base's own.
template <class Base, class Options>
class MultiTensorOptimizer : public Base {
 public:
  MultiTensorOptimizer(std::vector<torch::optim::OptimizerParamGroup> groups, Options defaults, StepKernel kernel)
      : Base(std::move(groups), std::move(defaults)), kernel_(kernel) {}
  torch::Tensor step(typename Base::LossClosure closure = nullptr) override;

 private:
  StepKernel kernel_;
};

using MultiTensorAdamW = MultiTensorOptimizer<torch::optim::AdamW, torch::optim::AdamWOptions>;
using MultiTensorSgd = MultiTensorOptimizer<torch::optim::SGD, torch::optim::SGDOptions>;

template <>
torch::Tensor MultiTensorAdamW::step(LossClosure closure);
template <>
torch::Tensor MultiTensorSgd::step(LossClosure closure);

// Whether this LibTorch build has fused AdamW/SGD kernels for tensors of `dtype` on `device`;
// when not, `why` says why (for the error that names optim.implementation).
bool fused_optimizer_available(const c10::Device& device, c10::ScalarType dtype, std::string* why = nullptr);

}  // namespace shoplens
