// Learning-rate schedules and the fine-tuning freeze plan: pure functions of the step, so a
// resumed run recomputes them instead of storing them, and tests need no model.
#pragma once

#include <cstdint>

#include "shoplens/core/config.h"

namespace shoplens {

class LrSchedule {
 public:
  // `steps_per_epoch` optimizer steps make an epoch; the schedule spans `total_steps`.
  LrSchedule(const ScheduleConfig& config, std::int64_t steps_per_epoch, std::int64_t total_steps);
  // Multiplier of the configured learning rate at optimizer step `step` (0-based).
  double factor(std::int64_t step) const;
  std::int64_t warmup_steps() const { return warmup_steps_; }

 private:
  ScheduleConfig config_;
  std::int64_t steps_per_epoch_;
  std::int64_t total_steps_;
  std::int64_t warmup_steps_;
};

// How many backbone stages train at `epoch` (fractional: step / steps_per_epoch), counted from
// the output side: 0 while the backbone is frozen, then one more every `unfreeze_every_epochs`
// (all at once when that is 0), up to `num_stages`.
int trainable_stages(const TrainConfig& config, double epoch, int num_stages);

}  // namespace shoplens
