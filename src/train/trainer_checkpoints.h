// The trainer's checkpoints (private to src/train): when one is due, writing it (rank 0, after
// the ledger barrier; keep_last and best.ckpt are the CheckpointStore's), resuming from one, and
// the best weights for the final test.
#pragma once

#include <cstdint>
#include <string>

#include "trainer_run.h"

namespace shoplens {

// Whether the step's checkpoint is due: every `every` steps, or with every evaluation when
// `every` is 0; a best evaluation always writes one.
bool checkpoint_due(std::int64_t step, int every, bool evaluated_now, bool best);

class TrainerCheckpoints {
 public:
  explicit TrainerCheckpoints(TrainerRun& run) : run_(run) {}
  // Writes the checkpoint of the current step (rank 0; every rank calls it).
  void save(bool is_best);
  // Whether the current step is saved already.
  bool saved_current_step() const { return last_saved_step_ == run_.state.step; }
  // Restores model, optimizer, loss scaler, RNG, data position and history.
  void resume(const Checkpoint& checkpoint);
  // SIGINT/SIGTERM: checkpoint the step reached and throw InterruptedError.
  [[noreturn]] void stop_for_interrupt();
  // The newest step checkpoint's path, empty when there is none.
  std::string last_good() const;
  // Loads the best checkpoint's weights on every rank (rank 0 reads it and broadcasts), the EMA's
  // when EMA is on. Returns false when the current weights are the best.
  bool load_best_weights();

 private:
  TrainerRun& run_;
  std::int64_t last_saved_step_ = -1;
};

}  // namespace shoplens
