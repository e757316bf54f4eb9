// One training run's shared pieces (private to src/train): the configuration, model and data, the
// device, the train loader and its step counts, the optimizer and step, the checkpoint store, the
// metric log, the state a checkpoint saves, and the data-parallel group. The trainer's units (the
// evaluator, checkpoints, run summary and loop) each work on it; Trainer::Impl owns it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "shoplens/core/process_memory.h"
#include "shoplens/core/progress.h"
#include "shoplens/core/interrupt.h"
#include "shoplens/data/loader.h"
#include "shoplens/dist/gradient_reducer.h"
#include "shoplens/dist/ledger.h"
#include "shoplens/dist/process_group.h"
#include "shoplens/train/captured_step.h"
#include "shoplens/train/ema.h"
#include "shoplens/train/metric_log.h"
#include "shoplens/train/optimizer.h"
#include "shoplens/train/schedule.h"
#include "shoplens/train/train_state.h"
#include "shoplens/train/train_step.h"
#include "shoplens/train/trainer.h"

namespace shoplens {

inline bool has_samples(const std::shared_ptr<const SampleSource>& s) { return s && s->size() > 0; }

// A metric with four decimals, "nan" when it is not finite.
std::string fmt_metric(double v);

struct TrainerRun {
  TrainerRun(Config c, std::shared_ptr<Classifier> m, TrainData d, std::filesystem::path dir,
             std::shared_ptr<ProcessGroup> g, std::string seg);

  Config config;
  std::shared_ptr<Classifier> model;
  TrainData data;
  std::filesystem::path run_dir;
  bool cuda = false;
  Precision precision = Precision::kFp32;

  std::unique_ptr<Loader> train_loader;
  std::unique_ptr<OptimizerSetup> optim;
  std::unique_ptr<TrainStep> step_runner;
  // train.cuda_graph: the step replayed from a CUDA graph when the run can be captured (then every
  // step goes through it), and why not when it cannot.
  std::unique_ptr<CapturedStep> captured_step;
  std::string cuda_graph_refusal;
  std::unique_ptr<CheckpointStore> store;
  std::unique_ptr<MetricLog> log;   // rank 0 only
  std::unique_ptr<WeightsEma> ema;  // train.ema_decay > 0
  TrainState state;

  std::int64_t micro_batches_per_epoch = 0;
  std::int64_t steps_per_epoch = 0;
  std::int64_t total_steps = 0;
  std::unique_ptr<LrSchedule> schedule;
  int trainable = -1;
  std::vector<std::string> stages;  // backbone stage prefixes, input side first
  // Text: token slots the model computed on (rows x padded length) and the real tokens among them.
  std::int64_t padded_tokens = 0, real_tokens = 0, micro_batches_run = 0;
  double input_wait_seconds = 0;  // this process: training time spent waiting for the loader
  ProgramFootprint program;       // resident before training: libraries, code (measure_program)
  bool job_peak_measured = false;
  double train_seconds_at_start = 0;  // a resumed run's earlier segments are in state.train_seconds
  bool resumed = false;
  std::string stop_reason = "completed";
  std::optional<Progress> progress;

  // Data parallelism: null group = one process. Rank 0 alone writes the run's files.
  std::shared_ptr<ProcessGroup> group;
  int rank = 0;
  int world = 1;
  std::int64_t global_batch = 0;
  std::unique_ptr<GradientReducer> reducer;
  std::unique_ptr<LedgerWriter> ledger;
  std::string segment;
  bool stop_agreed = false;  // SIGINT/SIGTERM seen on some rank, agreed at the last collective
  std::function<void(std::int64_t)> after_step;

  bool is_main() const { return rank == 0; }
  // The stop decision every rank takes at the same point: local without a group.
  // Steps that neither log, evaluate, checkpoint nor stop, and the host reads they made (the step's
  // own included): 0 per step unless the outcome of a step must be read (docs/TRAINING.md).
  std::int64_t quiet_steps = 0, quiet_step_reads = 0;
  void decide_cuda_graph();
  void count_quiet_step(std::int64_t reads) {
    ++quiet_steps;
    quiet_step_reads += reads;
  }
  bool should_stop() const { return group ? stop_agreed : interrupt_requested(); }
  double epoch_progress() const { return static_cast<double>(state.step) / std::max<std::int64_t>(1, steps_per_epoch); }
  int effective_micro_batch() const { return state.micro_split > 0 ? state.micro_split : config.loader.batch_size; }
  std::unique_ptr<Loader> make_loader(const std::shared_ptr<const SampleSource>& split,
                                      const LoaderOptions& options) const;
  // Replicas start identical: rank 0's parameters and buffers (fresh init, pretrained or resumed).
  void broadcast_model(bool buffers_only);
  // Head always trains; backbone stages train from the output side as the freeze plan allows.
  void apply_freeze_plan();

 private:
  void check_data_and_device();
  void setup_train_loader();
  void setup_step();
  void measure_program();
  void rebuild_reducer();
};

}  // namespace shoplens
