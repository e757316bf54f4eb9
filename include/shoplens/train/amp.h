// Mixed precision: autocast regions and dynamic loss scaling (the 1.13 / 2.x API differences
// live in src/torch_compat.h, docs/GPU.md). There is no C++ GradScaler in
// either version, so LossScaler implements torch.cuda.amp.GradScaler's rules: the fused ATen
// ops on CUDA, ordinary tensor ops elsewhere (CPU, where 1.13 has no kernel for the fused ones).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "shoplens/core/precision.h"

namespace shoplens {

// Enables autocast for `device_type` ("cpu" or "cuda") with the precision's dtype for its
// lifetime; no-op for fp32. Clears the autocast cache on exit, as torch.autocast does.
class AutocastScope {
 public:
  AutocastScope(bool cuda, Precision precision);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool cuda_;
  bool active_ = false;
  bool previous_enabled_ = false;
};

struct LossScalerOptions {
  bool enabled = false;
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int growth_interval = 2000;
};

class LossScaler {
 public:
  explicit LossScaler(LossScalerOptions options = {});
  bool enabled() const { return options_.enabled; }
  double scale() const { return scale_; }
  // loss x scale (the loss itself when disabled).
  at::Tensor scale_loss(const at::Tensor& loss) const;
  // Divides every defined gradient by the scale in place; returns true when any is inf or NaN.
  // When disabled, only checks for non-finite gradients.
  bool unscale_and_check(const std::vector<at::Tensor>& grads) const;
  // The same without reading the result: a one-element float device tensor, non-zero when any
  // gradient is inf or NaN (undefined when there is no gradient).
  at::Tensor unscale_found_inf(const std::vector<at::Tensor>& grads) const;
  // After a step: an overflow halves the scale (the step must be skipped); `growth_interval`
  // clean steps in a row double it.
  void update(bool found_inf);
  std::int64_t skipped_steps() const { return skipped_steps_; }
  // Steps skipped on the device (found_inf), counted when the trainer reads its tally.
  void count_skipped(std::int64_t steps) { skipped_steps_ += steps; }

  nlohmann::json state() const;
  void load_state(const nlohmann::json& state);

 private:
  LossScalerOptions options_;
  double scale_;
  int growth_tracker_ = 0;
  std::int64_t skipped_steps_ = 0;
};

}  // namespace shoplens
