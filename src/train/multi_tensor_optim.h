// Multi-tensor AdamW and SGD (optim.implementation, docs/TRAINING.md): LibTorch's own optimizers
// with step() replaced. Options, state (step counts, moments, momentum buffers) and save/load stay
// LibTorch's, so a checkpoint written under one implementation resumes under any other. Each
// parameter group's parameters are bucketed by device, dtype and step count and updated with
// at::_foreach_* ops (a handful of launches per bucket instead of a handful per parameter), or on
// LibTorch >= 2.4 with the fused kernels (one launch per bucket). The formulas are LibTorch's and
// PyTorch's: decoupled weight decay for AdamW; L2 weight decay, momentum with dampening, Nesterov
// and a first momentum buffer equal to the gradient for SGD. Parameters without a gradient (frozen)
// are skipped and keep their state, exactly as in the reference loop.
//
// The fused kernels can also skip a step on the device (step_unless): a non-finite step is then
// dropped without the host ever reading whether it was, which is what lets a training step run
// without a device-to-host read (TrainStepOptions::device_skip). AdamW's step counts then live on
// the device, one per parameter, and reach the host state when the optimizer is saved.
#pragma once

#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>
#include <torch/serialize/archive.h>
#include <torch/utils.h>

#include <string>
#include <unordered_map>
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
  // The step, left undone on the device where `found_inf` (a 0-dim tensor on the parameters'
  // device) is nonzero: parameters, moments and step counts stay as they were. Fused kernel only.
  void step_unless(const at::Tensor& found_inf);
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;

 private:
  void update(const at::Tensor& found_inf);
  void copy_device_steps_to_state() const;

  StepKernel kernel_;
  // Fused AdamW: each parameter's step count as a float on its device (what the kernel reads),
  // keyed by the parameter; the host state's count is brought up to date on save.
  std::unordered_map<const c10::TensorImpl*, at::Tensor> device_steps_;
};

using MultiTensorAdamW = MultiTensorOptimizer<torch::optim::AdamW, torch::optim::AdamWOptions>;
using MultiTensorSgd = MultiTensorOptimizer<torch::optim::SGD, torch::optim::SGDOptions>;

template <class Base, class Options>
torch::Tensor MultiTensorOptimizer<Base, Options>::step(typename Base::LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure != nullptr) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  update(at::Tensor());
  return loss;
}

template <class Base, class Options>
void MultiTensorOptimizer<Base, Options>::step_unless(const at::Tensor& found_inf) {
  TORCH_CHECK(kernel_ == StepKernel::kFused, "only the fused optimizer step can skip itself on the device");
  torch::NoGradGuard no_grad;
  update(found_inf.to(at::kFloat).reshape({}));
}

template <class Base, class Options>
void MultiTensorOptimizer<Base, Options>::save(torch::serialize::OutputArchive& archive) const {
  copy_device_steps_to_state();
  Base::save(archive);
}

template <class Base, class Options>
void MultiTensorOptimizer<Base, Options>::load(torch::serialize::InputArchive& archive) {
  Base::load(archive);
  device_steps_.clear();  // the loaded state's counts are the truth from here
}

template <>
void MultiTensorAdamW::update(const at::Tensor& found_inf);
template <>
void MultiTensorSgd::update(const at::Tensor& found_inf);
template <>
void MultiTensorAdamW::copy_device_steps_to_state() const;
template <>
void MultiTensorSgd::copy_device_steps_to_state() const;

// Whether this LibTorch build has fused AdamW/SGD kernels for tensors of `dtype` on `device`;
// when not, `why` says why (for the error that names optim.implementation).
bool fused_optimizer_available(const c10::Device& device, c10::ScalarType dtype, std::string* why = nullptr);

}  // namespace shoplens
