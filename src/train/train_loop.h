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

// The per-step values a deferred step leaves on the device (TrainStepOptions::defer_host_reads),
// summed there and read in one copy at log steps, evaluations, checkpoints and epoch ends.
// Elements (float64): loss sum over applied steps, applied steps, skipped steps, the current run of
// consecutive non-finite losses, the longest such run since the last read, the last finite loss
// and its step, the last grad norm (-1: not computed).
enum DeviceTallySlot { kLossSum, kApplied, kSkipped, kBadRun, kWorstRun, kLastLoss, kLastStep, kGradNorm, kSlots };
// Adds step `step`'s result (read or not) to `tally` (kSlots elements on the step's device) on
// the device; a step whose outcome was read on the host leaves the runs of bad steps to the host.
at::Tensor add_to_device_tally(const at::Tensor& tally, const StepResult& r, std::int64_t step);
// A fresh tally on `device` that continues a run of `bad_steps` non-finite steps.
at::Tensor empty_device_tally(const at::Device& device, int bad_steps);

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
  void log_interval(double grad_norm);
  // Reads the device tally into the host tallies and the state; true when it read anything.
  bool read_device_tally();
  bool flush_due() const;
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
  at::Tensor device_tally_;    // deferred reads not yet read (undefined: none)
  double last_grad_norm_ = -1;
};

}  // namespace shoplens
