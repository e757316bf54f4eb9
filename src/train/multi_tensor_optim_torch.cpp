#include "multi_tensor_optim.h"

#include <torch/torch.h>
#include <torch/version.h>

#include <cmath>
#include <sstream>
#include <type_traits>
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

void adamw_fused(Bucket& b, const AdamWOptions& o, std::int64_t step) {
#if SHOPLENS_FUSED_OPTIM
  // The kernel reads the (already incremented) step from a tensor on the bucket's device; the
  // bucket shares one step count, so one tensor serves every parameter.
  const auto step_tensor =
      at::full({}, static_cast<double>(step), at::TensorOptions().dtype(at::kFloat).device(b.device));
  const std::vector<at::Tensor> steps(b.params.size(), step_tensor);
  const auto [beta1, beta2] = o.betas();
  at::_fused_adamw_(b.params, b.grads, b.first, b.second, /*max_exp_avg_sqs=*/{}, steps, o.lr(), beta1, beta2,
                    o.weight_decay(), o.eps(), /*amsgrad=*/false, /*maximize=*/false);
#else
  (void)b, (void)o, (void)step;
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

void sgd_fused(Bucket& b, const SGDOptions& o, bool first_step) {
#if SHOPLENS_FUSED_OPTIM
  if (first_step) {  // the kernel writes the first buffer (the gradient, after weight decay)
    for (std::size_t i = 0; i < b.params.size(); ++i) {
      b.first.push_back(at::empty_like(b.params[i], at::MemoryFormat::Preserve));
      b.sgd_new_states[i]->momentum_buffer(b.first.back());
    }
  }
  at::_fused_sgd_(b.params, b.grads, b.first, o.weight_decay(), o.momentum(), o.lr(), o.dampening(), o.nesterov(),
                  /*maximize=*/false, first_step);
#else
  (void)b, (void)o, (void)first_step;
  TORCH_CHECK(false, "this LibTorch build has no fused SGD kernel");
#endif
}

template <class Fn>
torch::Tensor run_step(const torch::optim::Optimizer::LossClosure& closure, Fn&& update) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure != nullptr) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  update();
  return loss;
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

template <>
torch::Tensor MultiTensorAdamW::step(LossClosure closure) {
  return run_step(closure, [&] {
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
        for (auto* s : b.adam_states) s->step(step);
        use_fused(kernel_, b) ? adamw_fused(b, o, step) : adamw_foreach(b, o, step);
      }
    }
  });
}

template <>
torch::Tensor MultiTensorSgd::step(LossClosure closure) {
  return run_step(closure, [&] {
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
        use_fused(kernel_, b) ? sgd_fused(b, o, first_step) : sgd_foreach(b, o, first_step);
      }
    }
  });
}

}  // namespace shoplens
