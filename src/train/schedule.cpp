#include "shoplens/train/schedule.h"

#include <algorithm>
#include <cmath>

namespace shoplens {
namespace {

// Cosine interpolation from `from` (progress 0) to `to` (progress 1), PyTorch's _annealing_cos.
double anneal_cos(double from, double to, double progress) {
  return to + (from - to) * 0.5 * (1.0 + std::cos(M_PI * std::clamp(progress, 0.0, 1.0)));
}

// PyTorch's OneCycleLR (anneal_strategy "cos", two phases): cosine from warmup_start_factor up to
// 1 over the rise, then cosine down to min_lr_ratio at the last step.
double one_cycle_factor(const ScheduleConfig& config, std::int64_t warmup_steps, std::int64_t total_steps,
                        std::int64_t step) {
  if (step < warmup_steps) return anneal_cos(config.warmup_start_factor, 1.0, static_cast<double>(step) / warmup_steps);
  const std::int64_t fall = std::max<std::int64_t>(1, total_steps - 1 - warmup_steps);
  return anneal_cos(1.0, config.min_lr_ratio, static_cast<double>(step - warmup_steps) / fall);
}

}  // namespace

LrSchedule::LrSchedule(const ScheduleConfig& config, std::int64_t steps_per_epoch, std::int64_t total_steps)
    : config_(config),
      steps_per_epoch_(std::max<std::int64_t>(1, steps_per_epoch)),
      total_steps_(std::max<std::int64_t>(1, total_steps)) {
  // one_cycle's rise is its warm-up: pct_start of the whole run instead of warmup_epochs.
  const double rise = config.name == ScheduleKind::kOneCycle ? config.pct_start * total_steps_
                                                             : config.warmup_epochs * steps_per_epoch_;
  warmup_steps_ = std::min<std::int64_t>(std::llround(rise), total_steps_);
}

double LrSchedule::factor(std::int64_t step) const {
  step = std::max<std::int64_t>(0, step);
  if (config_.name == ScheduleKind::kOneCycle) return one_cycle_factor(config_, warmup_steps_, total_steps_, step);
  if (step < warmup_steps_) {
    const double t = static_cast<double>(step) / warmup_steps_;
    return config_.warmup_start_factor + (1.0 - config_.warmup_start_factor) * t;
  }
  if (config_.name == ScheduleKind::kConstant) return 1.0;
  if (config_.name == ScheduleKind::kStep) {
    const double every = config_.step_epochs * steps_per_epoch_;
    return std::pow(config_.gamma, std::floor((step - warmup_steps_) / every));
  }
  // cosine from the end of the warm-up to the last step, down to min_lr_ratio
  const std::int64_t span = std::max<std::int64_t>(1, total_steps_ - warmup_steps_);
  const double progress = std::min(1.0, static_cast<double>(step - warmup_steps_) / span);
  return config_.min_lr_ratio + (1.0 - config_.min_lr_ratio) * 0.5 * (1.0 + std::cos(M_PI * progress));
}

int trainable_stages(const TrainConfig& config, double epoch, int num_stages) {
  if (epoch < config.freeze_backbone_epochs) return 0;
  if (config.unfreeze_every_epochs <= 0) return num_stages;
  const double since = epoch - config.freeze_backbone_epochs;
  const int stages = 1 + static_cast<int>(std::floor(since / config.unfreeze_every_epochs));
  return std::min(stages, num_stages);
}

}  // namespace shoplens
