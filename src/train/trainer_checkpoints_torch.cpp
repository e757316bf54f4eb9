#include "trainer_checkpoints.h"

#include <torch/torch.h>

#include <spdlog/spdlog.h>

#include "shoplens/core/errors.h"
#include "shoplens/models/classifier.h"

namespace shoplens {
namespace fs = std::filesystem;

bool checkpoint_due(std::int64_t step, int every, bool evaluated_now, bool best) {
  return best || (every > 0 && step % every == 0) || (every == 0 && evaluated_now);
}

void TrainerCheckpoints::save(bool is_best) {
  auto& state = run_.state;
  last_saved_step_ = state.step;
  // A checkpoint marks its steps as done. With a ledger, every rank's line for them must be
  // written first: a rank that died before writing it fails this barrier, so the step is redone
  // and recorded in the next segment instead of missing from the ledger.
  if (run_.group && run_.ledger) run_.group->barrier();
  if (!run_.is_main()) return;  // the replicas are identical: rank 0's copy stands for all
  state.train_seconds_at_save = state.train_seconds;
  const auto doc = state_to_json(state, run_.config, *run_.model, run_.data.class_names, run_.step_runner->scaler());
  const std::string tensors = serialize_tensors(*run_.model, run_.optim->optimizer(), run_.ema.get());
  const auto path = run_.store->save(state.step, doc, tensors, is_best);
  spdlog::info("checkpoint: {}{}", path.string(), is_best ? " (best so far)" : "");
}

void TrainerCheckpoints::resume(const Checkpoint& checkpoint) {
  auto& state = run_.state;
  restore_state(checkpoint, run_.config, *run_.model, run_.data.class_names, run_.optim->optimizer(),
                run_.step_runner->scaler(), state, run_.ema.get());
  last_saved_step_ = state.step;
  run_.resumed = true;
  if (run_.log) run_.log->truncate_after(state.step);
  spdlog::info("train: resumed from {} (step {}, epoch {}, {} samples into it)", checkpoint.path.string(), state.step,
               state.epoch, state.epoch_samples);
}

void TrainerCheckpoints::stop_for_interrupt() {
  spdlog::warn("train: interrupted at step {}; {}", run_.state.step,
               run_.is_main() ? "writing a checkpoint before exiting" : "rank 0 writes the checkpoint");
  save(false);
  throw InterruptedError();
}

std::string TrainerCheckpoints::last_good() const {
  const auto saved = run_.store->list();
  return saved.empty() ? "" : saved.back().string();
}

bool TrainerCheckpoints::load_best_weights() {
  const auto& state = run_.state;
  if (!state.best_step || *state.best_step == state.step) return false;
  // Rank 0 reads the best checkpoint and hands the weights on: other nodes may not share its disk.
  // With EMA the best is the EMA's (validation scored it), so those are the weights tested.
  const fs::path best = run_.store->best_path();
  if (run_.is_main() && fs::exists(best))
    restore_model_weights(*run_.model, read_checkpoint(best).tensors,
                          run_.ema ? CheckpointWeights::kEmaIfPresent : CheckpointWeights::kRaw);
  run_.broadcast_model(/*buffers_only=*/false);
  spdlog::info("test: using the best {}weights (step {})", run_.ema ? "EMA " : "", *state.best_step);
  return true;
}

}  // namespace shoplens
