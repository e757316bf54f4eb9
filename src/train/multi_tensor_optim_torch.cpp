#include "multi_tensor_optim.h"

#include <torch/torch.h>
#include <torch/version.h>

#include <cmath>
#include <sstream>
#include <type_traits>
#include <unordered_map>
#include <vector>
#include <utility>

// The fused AdamW/SGD kernels have CPU and CUDA implementations from LibTorch 2.4 on.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define SHOPLENS_FUSED_OPTIM 1
#else
#define SHOPLENS_FUSED_OPTIM 0
#endif

namespace shoplens {
namespace {

using torch::optim::AdamWOptions;
using torch::optim::AdamWParamState;
using torch::optim::SGDOptions;
using torch::optim::SGDParamState;

// LibTorch keys an optimizer's state by the parameter's TensorImpl: its address printed as a
// string in 1.13, the address itself in 2.x.
template <class Map>
typename Map::key_type state_key(const Map& /*state*/, const at::Tensor& p) {
  if constexpr (std::is_same_v<typename Map::key_type, std::string>) {
    std::ostringstream os;
    os << p.unsafeGetTensorImpl();
    return os.str();
  } else {
    return p.unsafeGetTensorImpl();
  }
}

// Parameters of one group that step together: same device, dtype and `tag` (AdamW: the step
// count, which sets the bias corrections; SGD: whether momentum buffers exist yet).
struct Bucket {
  c10::Device device;
  at::ScalarType dtype;
  std::int64_t tag;
  std::vector<at::Tensor> params, grads, first, second;  // AdamW: exp_avg, exp_avg_sq; SGD: buffers
  std::vector<AdamWParamState*> adam_states;
  std::vector<SGDParamState*> sgd_new_states;  // SGD: the states whose first buffer this step makes
};

Bucket& bucket_for(std::vector<Bucket>& buckets, const at::Tensor& p, std::int64_t tag) {
  for (auto& b : buckets)
    if (b.device == p.device() && b.dtype == p.scalar_type() && b.tag == tag) return b;
  buckets.push_back(Bucket{p.device(), p.scalar_type(), tag, {}, {}, {}, {}, {}, {}});
  return buckets.back();
}

const at::Tensor& checked_grad(const at::Tensor& p, const char* optimizer) {
  TORCH_CHECK(!p.grad().is_sparse(), optimizer, " does not support sparse gradients");
  return p.grad();
}

bool use_fused(StepKernel kernel, const Bucket& b) {
  return kernel == StepKernel::kFused && fused_optimizer_available(b.device, b.dtype);
}

// LibTorch's AdamW::step, op for op, on a bucket's lists.
void adamw_foreach(Bucket& b, const AdamWOptions& o, std::int64_t step) {
  const double lr = o.lr();
  const auto [beta1, beta2] = o.betas();
  if (o.weight_decay() != 0) at::_foreach_mul_(b.params, 1 - lr * o.weight_decay());
  const double bias_correction1 = 1 - std::pow(beta1, step);
  const double bias_correction2 = 1 - std::pow(beta2, step);
  at::_foreach_mul_(b.first, beta1);
  at::_foreach_add_(b.first, b.grads, 1 - beta1);
  at::_foreach_mul_(b.second, beta2);
  at::_foreach_addcmul_(b.second, b.grads, b.grads, 1 - beta2);
  auto denom = at::_foreach_sqrt(b.second);
  at::_foreach_div_(denom, std::sqrt(bias_correction2));
  at::_foreach_add_(denom, o.eps());
  at::_foreach_addcdiv_(b.params, b.first, denom, -(lr / bias_correction1));
}

// The fused kernel reads each parameter's step count from a float tensor on its device. A step
// that `found_inf` skips leaves the count as it was, like the parameters and moments.
void adamw_fused(Bucket& b, const AdamWOptions& o, std::vector<at::Tensor>& steps, const at::Tensor& found_inf) {
#if SHOPLENS_FUSED_OPTIM
  if (found_inf.defined()) {
    const auto taken = 1 - found_inf;
    at::_foreach_add_(steps, std::vector<at::Tensor>(steps.size(), taken));
  } else {
    at::_foreach_add_(steps, 1);
  }
  const auto [beta1, beta2] = o.betas();
  const c10::optional<at::Tensor> inf = found_inf.defined() ? c10::optional<at::Tensor>(found_inf) : c10::nullopt;
  at::_fused_adamw_(b.params, b.grads, b.first, b.second, /*max_exp_avg_sqs=*/{}, steps, o.lr(), beta1, beta2,
                    o.weight_decay(), o.eps(), /*amsgrad=*/false, /*maximize=*/false, /*grad_scale=*/c10::nullopt, inf);
#else
  (void)b, (void)o, (void)steps, (void)found_inf;
  TORCH_CHECK(false, "this LibTorch build has no fused AdamW kernel");
#endif
}

// LibTorch's SGD::step, op for op, on a bucket's lists; `first` holds the momentum buffers.
void sgd_foreach(Bucket& b, const SGDOptions& o, bool first_step) {
  std::vector<at::Tensor> d_p = b.grads;
  if (o.weight_decay() != 0) d_p = at::_foreach_add(b.grads, b.params, o.weight_decay());
  if (o.momentum() != 0) {
    if (first_step) {
      for (std::size_t i = 0; i < d_p.size(); ++i) {
        b.first.push_back(torch::clone(d_p[i]).detach());
        b.sgd_new_states[i]->momentum_buffer(b.first.back());
      }
    } else {
      at::_foreach_mul_(b.first, o.momentum());
      at::_foreach_add_(b.first, d_p, 1 - o.dampening());
    }
    d_p = o.nesterov() ? at::_foreach_add(d_p, b.first, o.momentum()) : b.first;
  }
  at::_foreach_add_(b.params, d_p, -o.lr());
}

void sgd_fused(Bucket& b, const SGDOptions& o, bool first_step, const at::Tensor& found_inf) {
#if SHOPLENS_FUSED_OPTIM
  // On its first step the kernel writes the buffer (the gradient after weight decay) into whatever
  // it is given. A first step that may be skipped starts from zeros and runs as a later step
  // instead: without dampening, 0 x momentum + gradient is that same first buffer, and a skip
  // leaves zeros, not garbage.
  const bool may_skip = found_inf.defined();
  TORCH_CHECK(!(may_skip && first_step && o.dampening() != 0), "a fused SGD step that may skip needs dampening 0");
  if (first_step) {
    for (std::size_t i = 0; i < b.params.size(); ++i) {
      b.first.push_back(may_skip ? at::zeros_like(b.params[i], at::MemoryFormat::Preserve)
                                 : at::empty_like(b.params[i], at::MemoryFormat::Preserve));
      b.sgd_new_states[i]->momentum_buffer(b.first.back());
    }
  }
  const c10::optional<at::Tensor> inf = may_skip ? c10::optional<at::Tensor>(found_inf) : c10::nullopt;
  at::_fused_sgd_(b.params, b.grads, b.first, o.weight_decay(), o.momentum(), o.lr(), o.dampening(), o.nesterov(),
                  /*maximize=*/false, first_step && !may_skip, /*grad_scale=*/c10::nullopt, inf);
#else
  (void)b, (void)o, (void)first_step, (void)found_inf;
  TORCH_CHECK(false, "this LibTorch build has no fused SGD kernel");
#endif
}

}  // namespace

bool fused_optimizer_available(const c10::Device& device, c10::ScalarType dtype, std::string* why) {
  auto no = [&](std::string reason) {
    if (why) *why = std::move(reason);
    return false;
  };
#if SHOPLENS_FUSED_OPTIM
  if (!device.is_cpu() && !device.is_cuda())
    return no("LibTorch's fused optimizer kernels run on CPU and CUDA, the parameters are on " + device.str());
  if (!at::isFloatingType(dtype))
    return no(std::string("the fused optimizer kernels take floating-point parameters, not ") + c10::toString(dtype));
  return true;
#else
  (void)device, (void)dtype;
  return no("this build's LibTorch " TORCH_VERSION " has no fused optimizer kernels (they came in LibTorch 2.4)");
#endif
}

namespace {

// A bucket's per-parameter step counts on the device, made from the host state's count (`b.tag`,
// before this step) the first time a parameter steps or after a load.
std::vector<at::Tensor> device_step_counts(std::unordered_map<const c10::TensorImpl*, at::Tensor>& counts,
                                           const Bucket& b) {
  std::vector<at::Tensor> steps;
  for (const auto& p : b.params) {
    auto& count = counts[p.unsafeGetTensorImpl()];
    if (!count.defined())
      count = at::full({}, static_cast<double>(b.tag), at::TensorOptions().dtype(at::kFloat).device(b.device));
    steps.push_back(count);
  }
  return steps;
}

void check_may_skip(const at::Tensor& found_inf, const char* optimizer) {
  TORCH_CHECK(!found_inf.defined(), optimizer, ": only the fused kernels skip a step on the device");
}

}  // namespace

template <>
void MultiTensorAdamW::update(const at::Tensor& found_inf) {
  for (auto& group : param_groups_) {
    auto& o = static_cast<AdamWOptions&>(group.options());
    TORCH_CHECK(!o.amsgrad(), "the multi-tensor AdamW has no amsgrad (optim.implementation=reference has)");
    std::vector<Bucket> buckets;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      const auto& grad = checked_grad(p, "AdamW");
      const auto key = state_key(state_, p);
      if (state_.find(key) == state_.end()) {
        auto fresh = std::make_unique<AdamWParamState>();
        fresh->step(0);
        fresh->exp_avg(torch::zeros_like(p, at::MemoryFormat::Preserve));
        fresh->exp_avg_sq(torch::zeros_like(p, at::MemoryFormat::Preserve));
        state_[key] = std::move(fresh);
      }
      auto& s = static_cast<AdamWParamState&>(*state_[key]);
      Bucket& b = bucket_for(buckets, p, s.step());
      b.params.push_back(p);
      b.grads.push_back(grad);
      b.first.push_back(s.exp_avg());
      b.second.push_back(s.exp_avg_sq());
      b.adam_states.push_back(&s);
    }
    for (auto& b : buckets) {
      const std::int64_t step = b.tag + 1;
      for (auto* s : b.adam_states) s->step(step);  // the fused path's true count is on the device
      if (use_fused(kernel_, b)) {
        auto steps = device_step_counts(device_steps_, b);
        adamw_fused(b, o, steps, found_inf);
      } else {
        check_may_skip(found_inf, "AdamW");
        adamw_foreach(b, o, step);
      }
    }
  }
}

// One read of every fused step count, on save only: the checkpoint holds the steps taken.
template <>
void MultiTensorAdamW::copy_device_steps_to_state() const {
  std::vector<at::Tensor> counts;
  std::vector<AdamWParamState*> states;
  for (const auto& group : param_groups_)
    for (const auto& p : group.params()) {
      const auto count = device_steps_.find(p.unsafeGetTensorImpl());
      const auto state = state_.find(state_key(state_, p));
      if (count == device_steps_.end() || state == state_.end()) continue;
      counts.push_back(count->second);
      states.push_back(static_cast<AdamWParamState*>(state->second.get()));
    }
  if (counts.empty()) return;
  const auto host = at::stack(counts).to(at::kCPU, at::kDouble);
  const auto* values = host.data_ptr<double>();
  for (std::size_t i = 0; i < states.size(); ++i) states[i]->step(static_cast<std::int64_t>(std::llround(values[i])));
}

template <>
void MultiTensorSgd::update(const at::Tensor& found_inf) {
  for (auto& group : param_groups_) {
    auto& o = static_cast<SGDOptions&>(group.options());
    const bool momentum = o.momentum() != 0;
    std::vector<Bucket> buckets;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      const auto& grad = checked_grad(p, "SGD");
      const auto key = state_key(state_, p);
      const auto found = momentum ? state_.find(key) : state_.end();
      const bool has_buffer = found != state_.end();
      Bucket& b = bucket_for(buckets, p, has_buffer ? 1 : 0);
      b.params.push_back(p);
      b.grads.push_back(grad);
      if (has_buffer) b.first.push_back(static_cast<SGDParamState&>(*found->second).momentum_buffer());
      if (momentum && !has_buffer) {
        state_[key] = std::make_unique<SGDParamState>();
        b.sgd_new_states.push_back(static_cast<SGDParamState*>(state_[key].get()));
      }
    }
    for (auto& b : buckets) {
      const bool first_step = momentum && b.tag == 0;
      if (use_fused(kernel_, b)) {
        sgd_fused(b, o, first_step, found_inf);
      } else {
        check_may_skip(found_inf, "SGD");
        sgd_foreach(b, o, first_step);
      }
    }
  }
}

template <>
void MultiTensorSgd::copy_device_steps_to_state() const {}  // SGD keeps no step count

}  // namespace shoplens
