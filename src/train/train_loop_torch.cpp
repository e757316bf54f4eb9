#include "train_loop.h"

#include <torch/torch.h>

#include <cmath>

#include <spdlog/spdlog.h>

#include "shoplens/core/errors.h"
#include "shoplens/core/plural.h"
#include "shoplens/core/strings.h"
#include "shoplens/data/loader.h"
#include "shoplens/models/classifier.h"

namespace shoplens {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

double TrainInterval::mean_loss() const { return steps ? loss / static_cast<double>(steps) : std::nan(""); }

bool log_step_due(std::int64_t step, int every, std::int64_t total_steps) {
  return step % every == 0 || step == total_steps;
}

bool patience_exhausted(int patience, int evals_without_improvement) {
  return patience > 0 && evals_without_improvement >= patience;
}

std::int64_t micro_batches_to_skip(std::int64_t epoch_samples, std::int64_t global_batch, int accumulation) {
  return epoch_samples / global_batch * accumulation;
}

std::string epoch_rate_text(const TrainInterval& epoch, double seconds, bool text, int world) {
  const double samples_per_second = seconds > 0 ? static_cast<double>(epoch.images) / seconds : 0.0;
  if (!text) return fmt::format("{:.1f} img/s", samples_per_second);
  return fmt::format("{:.1f} samples/s, {:.0f} tokens/s{}", samples_per_second,
                     seconds > 0 ? static_cast<double>(epoch.tokens) / seconds : 0.0, world > 1 ? " (this rank)" : "");
}

void TrainLoop::run() {
  const bool sync_buffers = begin();
  train_epochs(sync_buffers);
  if (run_.progress) run_.progress->finish();
}

// Checks the resume point, announces the run, syncs the ranks' weights. Returns whether buffers
// (BatchNorm statistics) are broadcast before every step.
bool TrainLoop::begin() {
  auto& state = run_.state;
  const auto& config = run_.config;
  run_.train_seconds_at_start = state.train_seconds;
  if (!run_.resumed && run_.log) run_.log->truncate_after(-1);  // a fresh run owns its log from step 0
  spdlog::info(
      "train: model {} ({} classes), {} on {}, micro-batch {} x {} accumulation{} = global batch {}; "
      "{} {}/epoch, {} in all{}",
      config.model.name, run_.data.class_names.size(), precision_name(run_.precision), run_.cuda ? "cuda" : "cpu",
      config.loader.batch_size, config.train.accumulation_steps,
      run_.world > 1 ? fmt::format(" x {} ranks", run_.world) : "", run_.global_batch, run_.steps_per_epoch,
      noun_for(run_.steps_per_epoch, "step"), count_of(run_.total_steps, "step"),
      state.step > 0 ? fmt::format(", resuming at step {}", state.step) : "");
  if (state.epoch_samples % run_.global_batch != 0)
    throw ConfigError(
        fmt::format("the checkpoint stopped {} samples into epoch {}, not a whole number of global batches "
                    "of {}: resume with the global batch it was trained with ({})",
                    state.epoch_samples, state.epoch, run_.global_batch, state.global_batch));
  state.global_batch = run_.global_batch;
  state.world_size = run_.world;
  run_.broadcast_model(/*buffers_only=*/false);
  // The EMA updates after applied steps only: it needs each step's outcome on the host.
  if (run_.ema && run_.step_runner->reads_nothing())
    throw Error("train: train.ema_decay needs each step's outcome on the host; the optimizer skips on the device");
  // A fresh run's average starts from the weights every rank now shares; a resumed one has its own.
  if (run_.ema && state.step == 0) *run_.ema = WeightsEma(*run_.model, config.train.ema_decay);
  if (config.dist.ledger)
    run_.ledger = std::make_unique<LedgerWriter>(run_.run_dir, run_.segment.empty() ? "run" : run_.segment, run_.rank,
                                                 run_.world, state.step);
  if (!has_samples(run_.data.val)) spdlog::warn("train: no validation samples: no evaluation, early stopping off");
  warn_if_epochs_leave_much_unread();
  if (state.step >= run_.total_steps && state.step > 0)
    spdlog::info(
        "train: the run is already at step {} of its {}: nothing left to train (raise train.epochs or "
        "train.max_steps to train further)",
        state.step, run_.total_steps);
  else if (run_.is_main()) {
    run_.progress.emplace("train", static_cast<std::uint64_t>(run_.total_steps), "step", 30.0);
    run_.progress->resume_at(static_cast<std::uint64_t>(state.step));
  }
  interval_ = TrainInterval{};
  epoch_tally_ = TrainInterval{};
  return run_.group && config.dist.broadcast_buffers && !run_.model->buffers().empty();
}

// Steps read whole global batches: the order's tail short of one is not read in an epoch. Said
// up front when that is a tenth of the split or more (verify-ledger says it again afterwards).
void TrainLoop::warn_if_epochs_leave_much_unread() const {
  const auto samples = static_cast<std::int64_t>(run_.train_loader->dataset_size());
  const std::int64_t tail = samples % run_.global_batch;
  if (!run_.is_main() || run_.config.train.class_balance == ClassBalance::kSampler || tail * 10 < samples) return;
  spdlog::warn(
      "train: each epoch reads {} of the {} training samples: the other {} ({:.0f}%) are the tail of its order "
      "short of a whole global batch of {} (steps read whole global batches); a smaller global batch, or one "
      "that divides the split, uses more of them",
      samples - tail, samples, tail, 100.0 * static_cast<double>(tail) / static_cast<double>(samples),
      run_.global_batch);
}

void TrainLoop::train_epochs(bool sync_buffers) {
  auto& state = run_.state;
  const auto& train = run_.config.train;
  bool stop = state.step >= run_.total_steps;
  while (!stop && state.epoch < train.epochs) {
    // Resuming mid-epoch continues at the next unread global batch of the same order; this rank
    // skips its share of the steps already taken (whatever world size took them).
    const std::int64_t skip = micro_batches_to_skip(state.epoch_samples, run_.global_batch, train.accumulation_steps);
    run_.train_loader->start_epoch(state.epoch, skip);
    if (run_.ledger && run_.is_main())
      run_.ledger->epoch(state.epoch, run_.steps_per_epoch, run_.global_batch, run_.train_loader->unread_sample_ids(),
                         train.class_balance == ClassBalance::kSampler);
    while (!stop) {
      run_.apply_freeze_plan();
      // Waiting for the loader is training time: a loader-bound run must not report the step's
      // compute rate as its images/s (the GPU's batch study overstated its speed-up 3x that way).
      const auto fetch_start = std::chrono::steady_clock::now();
      const std::vector<Batch> micro = next_global_batch();
      if (micro.empty()) break;
      const double fetch_seconds = seconds_since(fetch_start);
      state.train_seconds += fetch_seconds;
      run_.input_wait_seconds += fetch_seconds;
      const std::int64_t reads_before = run_.step_runner->host_reads().total();
      const StepResult r = train_step(micro, sync_buffers);
      account_step(r);
      const bool quiet = !log_step_due(state.step, train.log_every_steps, run_.total_steps) && !flush_due();
      stop = after_step_checks();
      if (quiet) run_.count_quiet_step(run_.step_runner->host_reads().total() - reads_before);
    }
    // The epoch is over when every micro-batch of it was consumed (a stop can land exactly there).
    if (skip + static_cast<std::int64_t>(run_.train_loader->stats().batches) >= run_.micro_batches_per_epoch)
      stop = finish_epoch() || stop;
  }
}

// This rank's micro-batches of the next global batch; empty at the end of the epoch.
std::vector<Batch> TrainLoop::next_global_batch() {
  std::vector<Batch> micro;
  while (static_cast<int>(micro.size()) < run_.config.train.accumulation_steps) {
    auto batch = run_.train_loader->next();
    if (!batch) break;
    micro.push_back(std::move(*batch));
  }
  return micro;
}

StepResult TrainLoop::train_step(const std::vector<Batch>& micro, bool sync_buffers) {
  auto& state = run_.state;
  run_.optim->set_lr_factor(run_.schedule->factor(state.step));
  const auto step_start = std::chrono::steady_clock::now();
  if (sync_buffers) run_.broadcast_model(/*buffers_only=*/true);
  StepResult r = run_step(micro);
  if (run_.ema && r.applied) run_.ema->update(*run_.model, state.step);
  state.train_seconds += seconds_since(step_start);
  state.step++;
  state.epoch_samples += r.samples;
  state.images_trained += r.samples;
  if (run_.progress) run_.progress->advance();
  if (run_.after_step) run_.after_step(state.step);  // before the ledger line: the latest a rank can die unrecorded
  if (run_.ledger) {
    std::vector<std::uint64_t> ids;
    for (const auto& b : micro) ids.insert(ids.end(), b.sample_ids.begin(), b.sample_ids.end());
    run_.ledger->step(state.epoch, state.step, ids);
  }
  if (run_.group) run_.stop_agreed = run_.stop_agreed || r.stop_requested;
  return r;
}

// Runs the step; on out-of-memory halves the micro-batch (the accumulation doubles, the global
// batch and the data order stay) and retries the same step until it fits or is down to 1.
StepResult TrainLoop::run_step(const std::vector<Batch>& micro) {
  auto& state = run_.state;
  for (;;) {
    try {
      const auto pieces = cut_micro_batches(micro, state.micro_split, run_.config.loader.token_budget);
      // A captured run has one micro-batch per step (cuda_graph_decision refuses accumulation).
      StepResult r = run_.captured_step ? run_.captured_step->run(pieces.at(0)) : run_.step_runner->run(pieces);
      for (const auto& piece : pieces) {
        run_.padded_tokens += piece.padded_tokens();
        run_.real_tokens += piece.real_tokens();
        epoch_tally_.tokens += piece.real_tokens();
      }
      run_.micro_batches_run += static_cast<std::int64_t>(pieces.size());
      return r;
    } catch (const OutOfMemoryError& e) {
      const int current = run_.effective_micro_batch();
      if (!run_.config.train.oom_recovery || current <= 1)
        throw Error(std::string(e.what()) + (current <= 1 ? "; even a micro-batch of 1 does not fit: raise "
                                                            "train.memory_budget or use a smaller model"
                                                          : "; train.oom_recovery is off"));
      state.micro_split = (current + 1) / 2;
      state.oom_retries++;
      spdlog::warn(
          "train: out of memory at step {} with micro-batches of {}: retrying the step with micro-batches of {} "
          "(global batch unchanged); set loader.batch_size to {} or run find-batch to avoid the retry",
          state.step + 1, current, state.micro_split, state.micro_split);
    }
  }
}

at::Tensor empty_device_tally(const at::Device& device, int bad_steps) {
  auto tally = torch::zeros({kSlots}, torch::TensorOptions().device(device).dtype(torch::kDouble));
  tally[kBadRun].fill_(bad_steps);
  tally[kLastLoss].fill_(std::nan(""));
  tally[kGradNorm].fill_(-1.0);
  return tally;
}

at::Tensor add_to_device_tally(const at::Tensor& tally, const StepResult& r, std::int64_t step) {
  const auto found = r.found_inf.to(tally.device()).reshape({});
  const auto bad = found.to(torch::kDouble);
  const auto loss = r.loss_value.to(tally.device(), torch::kDouble).reshape({});
  const auto zero = torch::zeros({}, tally.options());
  const auto bad_run = (tally[kBadRun] + 1) * bad;
  const auto grad_norm = r.grad_norm_value.defined()
                             ? torch::where(found, torch::full({}, std::nan(""), tally.options()),
                                            r.grad_norm_value.to(tally.device(), torch::kDouble).reshape({}))
                             : torch::full({}, -1.0, tally.options());
  return torch::stack(
      {tally[kLossSum] + torch::where(found, zero, loss), tally[kApplied] + (1 - bad), tally[kSkipped] + bad, bad_run,
       torch::maximum(tally[kWorstRun], bad_run), torch::where(found, tally[kLastLoss], loss),
       torch::where(found, tally[kLastStep], torch::full({}, static_cast<double>(step), tally.options())), grad_norm});
}

// Divergence bookkeeping and the periodic line of the metric log. A deferred step's loss goes to
// the device tally; its outcome is the host's when it was read, else the tally's too.
void TrainLoop::account_step(const StepResult& r) {
  auto& state = run_.state;
  if (!r.loss_read)
    device_tally_ = add_to_device_tally(
        device_tally_.defined() ? device_tally_ : empty_device_tally(r.loss_value.device(), state.bad_steps), r,
        state.step);
  if (r.outcome_read && !r.applied) {
    // Under fp16 an overflow in the gradients is routine (the scaler backs off); a non-finite
    // loss, or any non-finite step without scaling, counts toward divergence.
    if (r.loss_non_finite || !run_.step_runner->scaler().enabled()) state.bad_steps++;
    spdlog::debug("train: step {} skipped (non-finite {})", state.step, r.loss_non_finite ? "loss" : "gradients");
    if (state.bad_steps >= run_.config.train.max_bad_steps) {
      read_device_tally();  // the last finite loss, for the diagnostic
      diverged();
    }
  } else if (r.outcome_read) {
    state.bad_steps = 0;
    state.last_finite_step = state.step;
    if (r.loss_read) {
      state.last_finite_loss = r.loss;
      for (auto* tally : {&interval_, &epoch_tally_}) {
        tally->loss += r.loss;
        tally->steps++;
      }
    }
  }
  if (r.loss_read) last_grad_norm_ = r.grad_norm;
  interval_.images += r.samples;
  epoch_tally_.images += r.samples;
  if (log_step_due(state.step, run_.config.train.log_every_steps, run_.total_steps)) {
    read_device_tally();
    log_interval(last_grad_norm_);
  }
}

// One copy of the device tally. A run whose optimizer skips on the device learns here of its
// skipped steps and of a run of max_bad_steps non-finite losses (docs/TRAINING.md).
bool TrainLoop::read_device_tally() {
  if (!device_tally_.defined()) return false;
  auto& state = run_.state;
  const auto host = run_.step_runner->host_reads().to_host(device_tally_, HostRead::kTally);
  device_tally_ = at::Tensor();
  const auto* v = host.data_ptr<double>();
  for (auto* tally : {&interval_, &epoch_tally_}) {
    tally->loss += v[kLossSum];
    tally->steps += static_cast<std::int64_t>(v[kApplied]);
  }
  if (v[kApplied] > 0) state.last_finite_loss = v[kLastLoss];
  last_grad_norm_ = v[kGradNorm];
  if (run_.step_runner->reads_nothing()) {
    if (v[kApplied] > 0) state.last_finite_step = static_cast<std::int64_t>(v[kLastStep]);
    run_.step_runner->scaler().count_skipped(static_cast<std::int64_t>(v[kSkipped]));
    state.bad_steps = static_cast<int>(v[kBadRun]);
    if (v[kWorstRun] >= run_.config.train.max_bad_steps) {
      state.bad_steps = static_cast<int>(v[kWorstRun]);
      diverged();
    }
  }
  return true;
}

// Whether this step evaluates, checkpoints or stops: the state must hold the tally's values.
bool TrainLoop::flush_due() const {
  const auto& train = run_.config.train;
  const std::int64_t step = run_.state.step;
  return run_.should_stop() || step >= run_.total_steps ||
         (train.eval_every_steps > 0 && step % train.eval_every_steps == 0) ||
         (train.checkpoint_every_steps > 0 && step % train.checkpoint_every_steps == 0);
}

void TrainLoop::log_interval(double grad_norm) {
  const double secs = seconds_since(interval_.start);
  const double mean_loss = interval_.mean_loss();
  const auto& scaler = run_.step_runner->scaler();
  const auto& loader_stats = run_.train_loader->stats();
  std::vector<std::pair<std::string, double>> values{
      {"loss", mean_loss},
      {"lr", run_.optim->head_lr()},
      {"images_per_second", secs > 0 ? static_cast<double>(interval_.images) / secs : 0.0},
      {"skipped_steps", static_cast<double>(scaler.skipped_steps())},
      {"data_wait_seconds", loader_stats.wait_seconds}};
  if (scaler.enabled()) values.emplace_back("loss_scale", scaler.scale());
  if (loader_stats.padded_tokens > 0) values.emplace_back("padding_fraction", loader_stats.padding_fraction());
  if (run_.state.oom_retries > 0) {
    values.emplace_back("oom_retries", static_cast<double>(run_.state.oom_retries));
    values.emplace_back("micro_batch", static_cast<double>(run_.effective_micro_batch()));
  }
  if (grad_norm >= 0) values.emplace_back("grad_norm", grad_norm);
  if (run_.log) run_.log->record(run_.state.step, run_.epoch_progress(), "train", values);
  if (run_.progress)
    run_.progress->set_suffix(fmt::format("loss (last {}) {}  lr {:.3g}", count_of(interval_.steps, "step"),
                                          fmt_metric(mean_loss), run_.optim->head_lr()));
  interval_ = TrainInterval{};
}

// Evaluation and checkpoint on their step schedules; returns whether training stops here.
bool TrainLoop::after_step_checks() {
  const auto& train = run_.config.train;
  const std::int64_t step = run_.state.step;
  if (flush_due()) read_device_tally();
  if (run_.should_stop()) checkpoints_.stop_for_interrupt();
  const bool eval_now = train.eval_every_steps > 0 && step % train.eval_every_steps == 0;
  bool best = false;
  if (eval_now) {
    best = evaluator_.validate();
    if (run_.should_stop()) checkpoints_.stop_for_interrupt();
  }
  if (checkpoint_due(step, train.checkpoint_every_steps, eval_now, best)) checkpoints_.save(best);
  bool stop = stop_early();
  if (step >= run_.total_steps) {
    if (train.max_steps > 0 && step >= train.max_steps) run_.stop_reason = "max_steps";
    stop = true;
  }
  return stop;
}

// Counts the epoch; evaluates and checkpoints when evaluation is per epoch. Returns whether
// early stopping ends training here.
bool TrainLoop::finish_epoch() {
  read_device_tally();
  run_.state.epoch++;
  run_.state.epoch_samples = 0;
  log_epoch();
  if (run_.config.train.eval_every_steps != 0 || run_.stop_reason == "early_stopped") return false;
  const bool best = evaluator_.validate();
  if (run_.should_stop()) checkpoints_.stop_for_interrupt();
  checkpoints_.save(best);
  return stop_early();
}

// One line per epoch on the console and in the log file, terminal or not (the bar is only drawn
// on a terminal): mean training loss, throughput, and the time left at this epoch's pace. The
// progress line's loss is the last log interval's, so each says which it is.
void TrainLoop::log_epoch() {
  const double secs = seconds_since(epoch_tally_.start);
  const double steps_per_second = secs > 0 ? static_cast<double>(epoch_tally_.steps) / secs : 0.0;
  const auto& state = run_.state;
  const double eta = steps_per_second > 0 ? static_cast<double>(run_.total_steps - state.step) / steps_per_second : 0.0;
  if (run_.is_main())
    spdlog::info("train: epoch {}/{} done at step {}/{}: train loss (epoch mean) {}, {}, eta {}", state.epoch,
                 run_.config.train.epochs, state.step, run_.total_steps, fmt_metric(epoch_tally_.mean_loss()),
                 epoch_rate_text(epoch_tally_, secs, run_.model->is_text(), run_.world), format_duration(eta));
  epoch_tally_ = TrainInterval{};
}

bool TrainLoop::stop_early() {
  if (!patience_exhausted(run_.config.train.patience, run_.state.evals_without_improvement)) return false;
  run_.stop_reason = "early_stopped";
  return true;
}

void TrainLoop::diverged() const {
  const auto& state = run_.state;
  const std::string where = checkpoints_.last_good();
  throw Error(fmt::format(
      "training diverged: the loss or gradients were not finite for {} consecutive steps (up to step {}, epoch "
      "{:.2f}, "
      "head lr {:.3g}, last finite loss {} at step {}). Lower optim.lr, set optim.clip_grad_norm, check the data, or "
      "use train.precision=fp32.{}",
      state.bad_steps, state.step, run_.epoch_progress(), run_.optim->head_lr(), fmt_metric(state.last_finite_loss),
      state.last_finite_step, where.empty() ? "" : " Last good checkpoint: " + where));
}

}  // namespace shoplens
