#include "shoplens/train/amp.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "shoplens/core/errors.h"
#include "torch_compat.h"

namespace shoplens {

// ---- autocast (the 1.13 / 2.x split is in torch_compat.h) ----
namespace {

at::ScalarType dtype_of(Precision p) { return p == Precision::kFp16 ? at::kHalf : at::kBFloat16; }

using compat::autocast_enabled;
using compat::set_autocast;
using compat::set_autocast_dtype;

}  // namespace

AutocastScope::AutocastScope(bool cuda, Precision precision) : cuda_(cuda) {
  if (precision == Precision::kFp32) return;
  if (precision == Precision::kFp16 && !cuda)
    throw ConfigError("train.precision=fp16 needs CUDA (CPU autocast supports bf16 only); use bf16 or fp32 on CPU");
  previous_enabled_ = autocast_enabled(cuda);
  set_autocast_dtype(cuda, dtype_of(precision));
  set_autocast(cuda, true);
  at::autocast::increment_nesting();
  active_ = true;
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  // Cached casts of the weights are only valid inside one region (they change every step).
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  set_autocast(cuda_, previous_enabled_);
}

// ---- dynamic loss scaling ----

LossScaler::LossScaler(LossScalerOptions options) : options_(options), scale_(options.init_scale) {}

at::Tensor LossScaler::scale_loss(const at::Tensor& loss) const { return options_.enabled ? loss * scale_ : loss; }

bool LossScaler::unscale_and_check(const std::vector<at::Tensor>& grads) const {
  const auto found_inf = unscale_found_inf(grads);
  return found_inf.defined() && found_inf.item<float>() != 0.0f;
}

at::Tensor LossScaler::unscale_found_inf(const std::vector<at::Tensor>& grads) const {
  std::vector<at::Tensor> defined;
  for (const auto& g : grads)
    if (g.defined()) defined.push_back(g);
  if (defined.empty()) return {};
  const double inv_scale = options_.enabled ? 1.0 / scale_ : 1.0;
  auto found_inf = at::zeros({1}, defined.front().options().dtype(at::kFloat));
  if (defined.front().is_cuda()) {
    // One fused kernel over all gradients: unscales and records any inf/NaN on the device.
    auto inv = at::full({1}, inv_scale, defined.front().options().dtype(at::kFloat));
    at::_amp_foreach_non_finite_check_and_unscale_(defined, found_inf, inv);
    return found_inf;
  }
  for (auto& g : defined) {
    if (inv_scale != 1.0) g.mul_(inv_scale);
    found_inf.add_(g.isfinite().logical_not().any().to(at::kFloat));  // no read: the sum stays on the device
  }
  return found_inf;
}

void LossScaler::update(bool found_inf) {
  if (found_inf) ++skipped_steps_;
  if (!options_.enabled) return;
  if (found_inf) {
    scale_ *= options_.backoff_factor;
    growth_tracker_ = 0;
    return;
  }
  if (++growth_tracker_ >= options_.growth_interval) {
    const double grown = scale_ * options_.growth_factor;
    if (std::isfinite(grown)) scale_ = grown;  // GradScaler keeps the scale finite too
    growth_tracker_ = 0;
  }
}

nlohmann::json LossScaler::state() const {
  return {{"enabled", options_.enabled},
          {"scale", scale_},
          {"growth_tracker", growth_tracker_},
          {"skipped_steps", skipped_steps_}};
}

void LossScaler::load_state(const nlohmann::json& state) {
  scale_ = state.at("scale").get<double>();
  growth_tracker_ = state.at("growth_tracker").get<int>();
  skipped_steps_ = state.at("skipped_steps").get<std::int64_t>();
}

}  // namespace shoplens
