// The trainer's loop (private to src/train): epochs of global batches, each read as micro-batches
// (accumulation, halved after running out of memory), the schedule and freeze plan, the metric
// log's train lines every train.log_every_steps, evaluation and checkpoints on their schedules,
// early stopping, divergence and the interrupt.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "trainer_checkpoints.h"
#include "trainer_evaluator.h"
#include "trainer_run.h"

namespace shoplens {

// Losses and throughput since the last line of the metric log (or over an epoch).
struct TrainInterval {
  double loss = 0;
  std::int64_t steps = 0, images = 0;
  std::int64_t tokens = 0;  // text: this process's real tokens
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  double mean_loss() const;
};

// Whether `step` writes a train line: every `every` steps and at the last step.
bool log_step_due(std::int64_t step, int every, std::int64_t total_steps);
// Whether `evals_without_improvement` used up the patience (0: early stopping off).
bool patience_exhausted(int patience, int evals_without_improvement);
// Micro-batches of this rank already read in the epoch a resumed run continues.
std::int64_t micro_batches_to_skip(std::int64_t epoch_samples, std::int64_t global_batch, int accumulation);
// "123.4 img/s", or for a text model "123.4 samples/s, 5678 tokens/s" (" (this rank)" with
// several ranks).
std::string epoch_rate_text(const TrainInterval& epoch, double seconds, bool text, int world);

class TrainLoop {
 public:
  TrainLoop(TrainerRun& run, Evaluator& evaluator, TrainerCheckpoints& checkpoints)
      : run_(run), evaluator_(evaluator), checkpoints_(checkpoints) {}
  // Trains to the end (epochs, max_steps, early stopping); throws InterruptedError after
  // checkpointing on SIGINT/SIGTERM and Error when training diverges.
  void run();

 private:
  bool begin();
  void warn_if_epochs_leave_much_unread() const;
  void train_epochs(bool sync_buffers);
  std::vector<Batch> next_global_batch();
  StepResult train_step(const std::vector<Batch>& micro, bool sync_buffers);
  StepResult run_step(const std::vector<Batch>& micro);
  void account_step(const StepResult& r);
  void log_interval(const StepResult& r);
  bool after_step_checks();
  bool finish_epoch();
  void log_epoch();
  bool stop_early();
  [[noreturn]] void diverged() const;

  TrainerRun& run_;
  Evaluator& evaluator_;
  TrainerCheckpoints& checkpoints_;
  TrainInterval interval_;
  TrainInterval epoch_tally_;  // the same sums over the current epoch, for its closing log line
};

}  // namespace shoplens
