#include "shoplens/train/trainer.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>

#include <spdlog/spdlog.h>

#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/process_memory.h"
#include "shoplens/core/interrupt.h"
#include "shoplens/core/plural.h"
#include "shoplens/core/progress.h"
#include "shoplens/core/strings.h"
#include "shoplens/core/random.h"
#include "shoplens/core/runtime.h"
#include "shoplens/data/loader.h"
#include "shoplens/dist/gradient_reducer.h"
#include "shoplens/dist/ledger.h"
#include "shoplens/dist/process_group.h"
#include "shoplens/models/classifier.h"
#include "shoplens/train/binary_metrics.h"
#include "shoplens/train/ema.h"
#include "shoplens/train/metric_log.h"
#include "shoplens/train/metrics.h"
#include "shoplens/train/optimizer.h"
#include "shoplens/train/schedule.h"
#include "shoplens/train/train_state.h"
#include "shoplens/train/train_step.h"

namespace shoplens {
namespace fs = std::filesystem;
using json = nlohmann::json;

std::vector<std::int64_t> class_counts(const SampleSource& source) {
  std::vector<std::int64_t> counts(source.num_classes(), 0);
  for (std::size_t i = 0; i < source.size(); ++i) {
    const int label = source.label(i);
    if (label < 0 || label >= source.num_classes())
      throw DataError("sample " + std::to_string(i) + " has label " + std::to_string(label) + " outside [0, " +
                      std::to_string(source.num_classes()) + ")");
    counts[label]++;
  }
  return counts;
}

std::vector<double> inverse_frequency_weights(const std::vector<std::int64_t>& counts) {
  std::int64_t total = 0, present = 0;
  for (auto c : counts) {
    total += c;
    present += c > 0;
  }
  std::vector<double> weights(counts.size(), 0.0);
  for (std::size_t c = 0; c < counts.size(); ++c)
    if (counts[c] > 0) weights[c] = static_cast<double>(total) / (static_cast<double>(present) * counts[c]);
  return weights;
}

std::vector<std::uint32_t> balanced_epoch_order(const SampleSource& source, std::uint64_t seed, std::int64_t epoch) {
  std::vector<std::vector<std::uint32_t>> by_class(source.num_classes());
  for (std::size_t i = 0; i < source.size(); ++i) by_class[source.label(i)].push_back(static_cast<std::uint32_t>(i));
  std::vector<int> present;
  for (std::size_t c = 0; c < by_class.size(); ++c)
    if (!by_class[c].empty()) present.push_back(static_cast<int>(c));
  Rng rng(mix_seed(seed, static_cast<std::uint64_t>(epoch), 0xba1a9cedULL));
  std::vector<std::uint32_t> order(source.size());
  for (auto& index : order) {
    const auto& members = by_class[present[rng.uniform_int(static_cast<int>(present.size()))]];
    index = members[rng.uniform_int(static_cast<int>(members.size()))];
  }
  return order;
}

namespace {

struct EvalResult {
  ClassificationReport report;
  std::optional<BinaryMetrics> binary;  // two-class tasks: ranking metrics of the class-1 scores
  double loss = 0;
  double seconds = 0;
};

bool has_samples(const std::shared_ptr<const SampleSource>& s) { return s && s->size() > 0; }

std::string fmt_metric(double v) { return std::isfinite(v) ? fmt::format("{:.4f}", v) : "nan"; }

}  // namespace

struct Trainer::Impl {
  Config config;
  std::shared_ptr<Classifier> model;
  TrainData data;
  fs::path run_dir;
  bool cuda = false;
  Precision precision = Precision::kFp32;

  std::unique_ptr<Loader> train_loader;
  std::unique_ptr<OptimizerSetup> optim;
  std::unique_ptr<TrainStep> step_runner;
  std::unique_ptr<CheckpointStore> store;
  std::unique_ptr<MetricLog> log;
  std::unique_ptr<WeightsEma> ema;  // train.ema_decay > 0
  TrainState state;

  std::int64_t micro_batches_per_epoch = 0;
  std::int64_t steps_per_epoch = 0;
  std::int64_t total_steps = 0;
  std::unique_ptr<LrSchedule> schedule;
  int trainable = -1;
  std::vector<std::string> stages;  // backbone stage prefixes, input side first
  std::int64_t last_checkpoint_step = -1;
  int eval_batch_limit = 0;  // set after an evaluation ran out of memory
  // Text: token slots the model computed on (rows x padded length) and the real tokens among them.
  std::int64_t padded_tokens = 0, real_tokens = 0, micro_batches_run = 0;
  double input_wait_seconds = 0;  // this process: training time spent waiting for the loader
  ProgramFootprint program;       // resident before training: libraries, code (measure_program)
  bool job_peak_measured = false;
  double train_seconds_at_start = 0;  // a resumed run's earlier segments are in state.train_seconds

  // Data parallelism: null group = one process. Rank 0 alone writes the run's files.
  std::shared_ptr<ProcessGroup> group;
  int rank = 0;
  int world = 1;
  std::int64_t global_batch = 0;
  std::unique_ptr<GradientReducer> reducer;
  std::unique_ptr<LedgerWriter> ledger;
  std::string segment;
  bool stop_agreed = false;
  std::function<void(std::int64_t)> after_step;  // SIGINT/SIGTERM seen on some rank, agreed at the last collective

  bool is_main() const { return rank == 0; }
  // The stop decision every rank takes at the same point: local without a group.
  bool should_stop() const { return group ? stop_agreed : interrupt_requested(); }

  Impl(Config c, std::shared_ptr<Classifier> m, TrainData d, fs::path dir, std::shared_ptr<ProcessGroup> g,
       std::string seg)
      : config(std::move(c)),
        model(std::move(m)),
        data(std::move(d)),
        run_dir(std::move(dir)),
        group(std::move(g)),
        segment(std::move(seg)) {
    if (group) {
      rank = group->rank();
      world = group->world_size();
    }
    check_data_and_device();
    setup_train_loader();
    setup_step();
    stages = model->stage_prefixes();
    store = std::make_unique<CheckpointStore>(run_dir / "checkpoints", config.train.keep_last);
    if (is_main()) log = std::make_unique<MetricLog>(run_dir, config.train.tensorboard);
    state.best_metric = metric_name(config.train.early_stopping_metric);
    measure_program();
  }

  // The data matches the model, the device and precision are usable; the model moves there.
  void check_data_and_device() {
    if (!has_samples(data.train)) throw DataError("the train split has no samples");
    if (static_cast<int>(data.class_names.size()) != model->num_classes())
      throw ConfigError("the model has " + std::to_string(model->num_classes()) + " classes, the data " +
                        std::to_string(data.class_names.size()));
    precision = config.train.precision;
    cuda = wants_cuda(config.train.device);
    if (cuda && !cuda_available())
      throw ConfigError("train.device=cuda but this LibTorch has no usable CUDA device (" + torch_version() + ")");
    if (precision == Precision::kFp16 && !cuda)
      throw ConfigError("train.precision=fp16 needs CUDA (CPU autocast supports bf16 only); use bf16 or fp32");
    if (config.train.deterministic) at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/true);
    model->to(cuda ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU));
  }

  // The training loader, and the steps and schedule its epochs make.
  void setup_train_loader() {
    auto loader_options = loader_options_from_config(config, /*train=*/true);
    if (config.train.class_balance == ClassBalance::kSampler) {
      auto source = data.train;
      const auto seed = static_cast<std::uint64_t>(config.run.seed);
      loader_options.epoch_order = [source, seed](std::int64_t epoch) {
        return balanced_epoch_order(*source, seed, epoch);
      };
    }
    // Every step reads the next global batch of the epoch's order, this rank its share of it, so
    // the order and the position in it do not depend on the world size (exactly-once on resume).
    const int accumulation = config.train.accumulation_steps;
    global_batch = static_cast<std::int64_t>(config.loader.batch_size) * accumulation * world;
    loader_options.global_batch = global_batch;
    loader_options.rank = rank;
    loader_options.world_size = world;
    train_loader = make_loader(data.train, loader_options);
    micro_batches_per_epoch = train_loader->batches_per_epoch();
    steps_per_epoch = micro_batches_per_epoch / accumulation;
    if (steps_per_epoch == 0)
      throw DataError("the train split has " + std::to_string(data.train->size()) +
                      " samples, fewer than one global batch of " + std::to_string(global_batch) +
                      " (micro-batch x accumulation x world size)");
    total_steps = steps_per_epoch * config.train.epochs;
    if (config.train.max_steps > 0) total_steps = std::min(total_steps, config.train.max_steps);
    schedule = std::make_unique<LrSchedule>(config.schedule, steps_per_epoch, total_steps);
  }

  // The optimizer, the step (precision, class weights, the group) and the weights' EMA.
  void setup_step() {
    optim = std::make_unique<OptimizerSetup>(*model, config.optim);
    TrainStepOptions step_options = step_options_from_config(config, precision, cuda);
    if (config.train.class_balance == ClassBalance::kWeightedLoss) {
      auto weights = inverse_frequency_weights(class_counts(*data.train));
      step_options.class_weights = torch::tensor(weights, torch::kFloat);
    }
    step_options.group = group.get();
    step_runner = std::make_unique<TrainStep>(*model, optim->optimizer(), step_options);
    if (config.train.ema_decay > 0) ema = std::make_unique<WeightsEma>(*model, config.train.ema_decay);
  }

  // The program's own footprint (libraries, code), so that the summary can report the job's
  // resident peak net of it: what a CPU memory budget covers (docs/FIND_BATCH.md).
  void measure_program() {
    const std::int64_t host_tensors = cuda ? 0 : tensor_bytes(model->parameters()) + tensor_bytes(model->buffers());
    program = measure_program_footprint(host_tensors);
    job_peak_measured = reset_resident_peak();
  }

  bool resumed = false;

  std::unique_ptr<Loader> make_loader(const std::shared_ptr<const SampleSource>& split,
                                      const LoaderOptions& options) const {
    return make_split_loader(data, split, config, options);
  }

  double epoch_progress() const { return static_cast<double>(state.step) / std::max<std::int64_t>(1, steps_per_epoch); }

  // Head always trains; backbone stages train from the output side as the freeze plan allows.
  void apply_freeze_plan() {
    const int n = trainable_stages(config.train, epoch_progress(), static_cast<int>(stages.size()));
    if (n == trainable) return;
    trainable = n;
    const std::string head = model->head_prefix();
    const int first_trainable = static_cast<int>(stages.size()) - n;
    for (auto& item : model->named_parameters(true)) {
      const std::string& name = item.key();
      bool train = name.rfind(head, 0) == 0;
      if (!train) {
        int stage = 0;  // parameters outside every listed stage belong with the input side
        for (int s = 0; s < static_cast<int>(stages.size()); ++s)
          if (name.rfind(stages[s], 0) == 0) stage = s;
        train = stage >= first_trainable;
      }
      item.value().set_requires_grad(train);
      if (!train) item.value().mutable_grad() = at::Tensor();
    }
    if (config.train.freeze_backbone_epochs > 0 || n < static_cast<int>(stages.size()))
      spdlog::info("train: step {}: {} of {} backbone stages trainable (+ head)", state.step, n, stages.size());
    if (group) rebuild_reducer();
  }

  // The reducer covers the parameters that train now; every rank rebuilds it at the same step.
  void rebuild_reducer() {
    TrainStepOptions options = step_runner->options();
    std::vector<at::Tensor> trainable_params;
    for (const auto& p : model->parameters())
      if (p.requires_grad()) trainable_params.push_back(p);
    reducer.reset();
    reducer = std::make_unique<GradientReducer>(group, trainable_params,
                                                static_cast<std::int64_t>(config.dist.bucket_mb * 1024 * 1024));
    step_runner->set_reducer(reducer.get());
  }

  // Replicas start identical: rank 0's parameters and buffers (fresh init, pretrained or resumed).
  void broadcast_model(bool buffers_only) {
    if (!group) return;
    std::vector<at::Tensor> tensors;
    if (!buffers_only)
      for (const auto& p : model->parameters()) tensors.push_back(p.detach());
    for (const auto& b : model->buffers()) tensors.push_back(b.detach());
    if (!tensors.empty()) group->broadcast(tensors, 0);
  }

  // Evaluation at the configured batch; when it runs out of memory (a larger eval batch than
  // planned, another process on the device), again from the start at half the batch.
  EvalResult evaluate(const std::shared_ptr<const SampleSource>& source, const std::string& what) {
    int batch = config.train.eval_batch_size > 0 ? config.train.eval_batch_size : config.loader.batch_size;
    if (eval_batch_limit > 0) batch = std::min(batch, eval_batch_limit);
    for (;;) {
      try {
        return evaluate_at(source, what, batch);
      } catch (const std::exception& e) {
        model->train();
        if (!is_out_of_memory(e) || !config.train.oom_recovery || batch <= 1) throw;
        spdlog::warn("{}: out of memory at evaluation batch {}: evaluating again at {}", what, batch, (batch + 1) / 2);
        batch = (batch + 1) / 2;
        eval_batch_limit = batch;
        state.oom_retries++;
      }
    }
  }

  // What an evaluation has counted so far (this rank's share until merge_ranks).
  struct EvalTally {
    explicit EvalTally(int classes) : confusion(classes) {}
    ConfusionMatrix confusion;
    std::vector<double> scores;  // two classes: the probability of class 1, with its label
    std::vector<int> score_labels;
    double loss_sum = 0;
    std::int64_t samples = 0;
  };

  EvalResult evaluate_at(const std::shared_ptr<const SampleSource>& source, const std::string& what, int batch) {
    const auto start = std::chrono::steady_clock::now();
    auto options = loader_options_from_config(config, /*train=*/false);
    options.batch_size = batch;
    // Each rank scores every world-th sample: the whole split once, no padding counted twice.
    if (group) {
      options.strided_share = true;
      options.rank = rank;
      options.world_size = world;
    }
    std::unique_ptr<Loader> loader;
    if (strided_share_size(source->size(), rank, world) > 0) {
      loader = make_loader(source, options);
      loader->start_epoch(0);
    }
    EvalTally tally(model->num_classes());
    model->eval();
    {
      torch::NoGradGuard no_grad;
      while (loader) {
        auto next = loader->next();
        if (!next) break;
        if (interrupt_requested()) break;  // the caller checkpoints and stops
        tally_batch(tally, *next);
      }
    }
    model->train();
    if (group) merge_ranks(tally, source->size());
    return eval_result(tally, what, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }

  void tally_batch(EvalTally& tally, const Batch& batch) {
    const auto device = cuda ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
    const bool binary = model->num_classes() == 2;
    at::Tensor logits;
    {
      AutocastScope autocast(cuda, precision);
      logits = model->forward_batch(batch, device);
    }
    auto losses = per_sample_loss(logits, batch.labels, at::Tensor(), at::Tensor(), 0.0);
    tally.loss_sum += losses.sum().item<double>();
    at::Tensor predicted;
    if (binary) {
      const auto p1 =
          torch::softmax(logits.to(torch::kFloat), 1).select(1, 1).to(torch::kCPU, torch::kDouble).contiguous();
      predicted = p1.ge(config.train.threshold).to(torch::kLong);
      tally.scores.insert(tally.scores.end(), p1.data_ptr<double>(), p1.data_ptr<double>() + p1.numel());
    } else {
      predicted = logits.argmax(1).to(torch::kCPU, torch::kLong).contiguous();
    }
    auto labels = batch.labels.contiguous();
    const std::int64_t* label_data = labels.data_ptr<std::int64_t>();
    tally.confusion.add_batch(label_data, predicted.data_ptr<std::int64_t>(), static_cast<std::size_t>(labels.size(0)));
    if (binary)
      for (std::int64_t i = 0; i < labels.size(0); ++i) tally.score_labels.push_back(static_cast<int>(label_data[i]));
    tally.samples += labels.size(0);
  }

  // Sums the ranks' confusion matrices and losses; the stop flag rides along so every rank
  // agrees on whether to stop after this evaluation.
  void merge_ranks(EvalTally& tally, std::size_t split_size) {
    const int k = model->num_classes();
    const auto& counts = tally.confusion.counts();
    auto totals = torch::empty({static_cast<std::int64_t>(counts.size()) + 3}, torch::kDouble);
    auto* t = totals.data_ptr<double>();
    for (std::size_t i = 0; i < counts.size(); ++i) t[i] = static_cast<double>(counts[i]);
    t[counts.size()] = tally.loss_sum;
    t[counts.size() + 1] = static_cast<double>(tally.samples);
    t[counts.size() + 2] = interrupt_requested() ? 1.0 : 0.0;
    std::vector<at::Tensor> tensors{totals};
    group->allreduce_sum(tensors);
    ConfusionMatrix merged(k);
    for (int label = 0; label < k; ++label)
      for (int predicted = 0; predicted < k; ++predicted)
        merged.add(label, predicted, static_cast<std::int64_t>(t[label * k + predicted]));
    tally.loss_sum = t[counts.size()];
    tally.samples = static_cast<std::int64_t>(t[counts.size() + 1]);
    stop_agreed = stop_agreed || t[counts.size() + 2] > 0;
    tally.confusion = merged;
    if (k == 2) gather_scores(split_size, tally.scores, tally.score_labels);
  }

  EvalResult eval_result(const EvalTally& tally, const std::string& what, double seconds) const {
    EvalResult result;
    result.report = classification_report(tally.confusion);
    if (model->num_classes() == 2 && !tally.scores.empty())
      result.binary = binary_metrics(tally.scores, tally.score_labels, config.train.threshold);
    result.loss = tally.samples ? tally.loss_sum / tally.samples : std::nan("");
    result.seconds = seconds;
    spdlog::info("{}: step {}: loss {} accuracy {} macro-F1 {}{} ({} samples, {:.1f} s)", what, state.step,
                 fmt_metric(result.loss), fmt_metric(result.report.accuracy), fmt_metric(result.report.macro_f1),
                 result.binary ? fmt::format(" ROC AUC {} PR AUC {}", fmt_metric(result.binary->roc_auc),
                                             fmt_metric(result.binary->pr_auc))
                               : std::string(),
                 tally.samples, result.seconds);
    return result;
  }

  // Every rank ends with the whole split's (score, label) pairs: rank r's strided share goes at
  // the offset of the shares before it, and one all-reduce sums the disjoint pieces.
  void gather_scores(std::size_t split_size, std::vector<double>& scores, std::vector<int>& labels) {
    std::size_t offset = 0;
    for (int r = 0; r < rank; ++r) offset += strided_share_size(split_size, r, world);
    auto all = torch::zeros({static_cast<std::int64_t>(split_size), 2}, torch::kDouble);
    auto* a = all.data_ptr<double>();
    for (std::size_t i = 0; i < scores.size(); ++i) {
      a[2 * (offset + i)] = scores[i];
      a[2 * (offset + i) + 1] = labels[i];
    }
    std::vector<at::Tensor> tensors{all};
    group->allreduce_sum(tensors);
    scores.resize(split_size);
    labels.resize(split_size);
    for (std::size_t i = 0; i < split_size; ++i) {
      scores[i] = a[2 * i];
      labels[i] = static_cast<int>(a[2 * i + 1]);
    }
  }

  json eval_record(const EvalResult& r, const std::string& phase) const {
    json rec = report_to_json(r.report, data.class_names);
    rec["phase"] = phase;
    rec["step"] = state.step;
    rec["epoch"] = epoch_progress();
    rec["loss"] = std::isfinite(r.loss) ? json(r.loss) : json(nullptr);
    if (r.binary) rec["binary"] = binary_metrics_to_json(*r.binary);
    return rec;
  }

  // `raw`: with EMA, the raw weights' scores, logged beside the EMA's as raw_<metric>.
  void log_eval(const EvalResult& r, const std::string& phase, const EvalResult* raw = nullptr) {
    if (!log) return;
    std::vector<std::pair<std::string, double>> values{
        {"loss", r.loss},
        {"accuracy", r.report.accuracy},
        {"macro_f1", r.report.macro_f1},
        {"weighted_f1", r.report.weighted_f1},
        {"macro_precision", r.report.macro_precision},
        {"macro_recall", r.report.macro_recall},
        // Training time so far: time-to-accuracy comparisons (the batch study) read it.
        {"train_seconds", state.train_seconds}};
    if (r.binary) {
      values.emplace_back("roc_auc", r.binary->roc_auc);
      values.emplace_back("pr_auc", r.binary->pr_auc);
      values.emplace_back("f1_at_threshold", r.binary->f1);
    }
    if (raw) {
      values.emplace_back("raw_loss", raw->loss);
      values.emplace_back("raw_accuracy", raw->report.accuracy);
      values.emplace_back("raw_macro_f1", raw->report.macro_f1);
    }
    log->record(state.step, epoch_progress(), phase, values);
  }

  // Validation + early-stopping bookkeeping; returns true when the current weights are the best.
  bool validate() {
    if (!has_samples(data.val)) return true;
    std::optional<EvalResult> raw;
    if (ema) {
      raw = evaluate(data.val, "val (raw weights)");
      if (should_stop()) return false;
    }
    EvalResult r = evaluate_ema(data.val, "val");
    if (should_stop()) return false;
    // With EMA the validation (and so the best checkpoint) is the EMA's; the raw weights' scores
    // sit beside it for comparison.
    log_eval(r, "val", raw ? &*raw : nullptr);
    json record = eval_record(r, "val");
    if (raw) {
      record["weights"] = "ema";
      record["raw"] = {{"macro_f1", raw->report.macro_f1},
                       {"accuracy", raw->report.accuracy},
                       {"loss", std::isfinite(raw->loss) ? json(raw->loss) : json(nullptr)}};
    }
    state.history.push_back(record);
    const double value = metric_value(r.report, r.loss, state.best_metric, r.binary ? &*r.binary : nullptr);
    const bool higher = metric_higher_is_better(state.best_metric);
    const bool improved = !state.best_step.has_value() ||
                          (std::isfinite(value) && (higher ? value > state.best_value : value < state.best_value));
    if (improved) {
      state.best_value = value;
      state.best_step = state.step;
      state.evals_without_improvement = 0;
    } else {
      state.evals_without_improvement++;
    }
    return improved;
  }

  // Evaluates with the EMA weights swapped in when EMA is on (the log line says so).
  EvalResult evaluate_ema(const std::shared_ptr<const SampleSource>& source, const std::string& what) {
    EmaInModel in_model(ema.get(), *model);
    return evaluate(source, ema ? what + " (EMA weights)" : what);
  }

  void checkpoint(bool is_best) {
    last_checkpoint_step = state.step;
    // A checkpoint marks its steps as done. With a ledger, every rank's line for them must be
    // written first: a rank that died before writing it fails this barrier, so the step is redone
    // and recorded in the next segment instead of missing from the ledger.
    if (group && ledger) group->barrier();
    if (!is_main()) return;  // the replicas are identical: rank 0's copy stands for all
    state.train_seconds_at_save = state.train_seconds;
    const json doc = state_to_json(state, config, *model, data.class_names, step_runner->scaler());
    const std::string tensors = serialize_tensors(*model, optim->optimizer(), ema.get());
    const auto path = store->save(state.step, doc, tensors, is_best);
    spdlog::info("checkpoint: {}{}", path.string(), is_best ? " (best so far)" : "");
  }

  void stop_for_interrupt() {
    spdlog::warn("train: interrupted at step {}; {}", state.step,
                 is_main() ? "writing a checkpoint before exiting" : "rank 0 writes the checkpoint");
    checkpoint(false);
    throw InterruptedError();
  }

  int effective_micro_batch() const { return state.micro_split > 0 ? state.micro_split : config.loader.batch_size; }

  // Runs the step; on out-of-memory halves the micro-batch (the accumulation doubles, the global
  // batch and the data order stay) and retries the same step until it fits or is down to 1.
  StepResult run_step(const std::vector<Batch>& micro) {
    for (;;) {
      try {
        const auto pieces = cut_micro_batches(micro, state.micro_split, config.loader.token_budget);
        StepResult r = step_runner->run(pieces);
        for (const auto& piece : pieces) {
          padded_tokens += piece.padded_tokens();
          real_tokens += piece.real_tokens();
          epoch_tally.tokens += piece.real_tokens();
        }
        micro_batches_run += static_cast<std::int64_t>(pieces.size());
        return r;
      } catch (const OutOfMemoryError& e) {
        const int current = effective_micro_batch();
        if (!config.train.oom_recovery || current <= 1)
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

  [[noreturn]] void diverged(const StepResult& r) {
    const auto saved = store->list();
    const std::string where = saved.empty() ? "" : saved.back().string();
    throw Error(fmt::format(
        "training diverged: the loss or gradients were not finite for {} consecutive steps (up to step {}, epoch "
        "{:.2f}, "
        "head lr {:.3g}, last finite loss {} at step {}). Lower optim.lr, set optim.clip_grad_norm, check the data, or "
        "use train.precision=fp32.{}",
        state.bad_steps, state.step, epoch_progress(), optim->head_lr(), fmt_metric(state.last_finite_loss),
        state.last_finite_step, where.empty() ? "" : " Last good checkpoint: " + where));
  }

  // Losses and throughput since the last line of the metric log.
  struct Interval {
    double loss = 0;
    std::int64_t steps = 0, images = 0;
    std::int64_t tokens = 0;  // text: this process's real tokens
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  };
  Interval interval;
  Interval epoch_tally;  // the same sums over the current epoch, for its closing log line
  std::optional<Progress> progress;
  std::string stop_reason = "completed";

  json fit() {
    const auto wall_start = std::chrono::steady_clock::now();
    const bool sync_buffers = begin_fit();
    train_epochs(sync_buffers);
    if (progress) progress->finish();
    if (last_checkpoint_step != state.step) checkpoint(!has_samples(data.val));
    if (!has_samples(data.val) && !state.best_step) state.best_step = state.step;
    const json test_json = test_with_best_weights();
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
    json summary = summary_record(test_json, wall);
    if (is_main()) write_file_atomic(run_dir / "summary.json", summary.dump(2) + "\n");
    log_summary(summary, test_json);
    return summary;
  }

  // Checks the resume point, announces the run, syncs the ranks' weights. Returns whether buffers
  // (BatchNorm statistics) are broadcast before every step.
  bool begin_fit() {
    train_seconds_at_start = state.train_seconds;
    if (!resumed && log) log->truncate_after(-1);  // a fresh run owns its log from step 0
    spdlog::info(
        "train: model {} ({} classes), {} on {}, micro-batch {} x {} accumulation{} = global batch {}; "
        "{} {}/epoch, {} in all{}",
        config.model.name, data.class_names.size(), precision_name(precision), cuda ? "cuda" : "cpu",
        config.loader.batch_size, config.train.accumulation_steps, world > 1 ? fmt::format(" x {} ranks", world) : "",
        global_batch, steps_per_epoch, noun_for(steps_per_epoch, "step"), count_of(total_steps, "step"),
        state.step > 0 ? fmt::format(", resuming at step {}", state.step) : "");
    if (state.epoch_samples % global_batch != 0)
      throw ConfigError(
          fmt::format("the checkpoint stopped {} samples into epoch {}, not a whole number of global batches "
                      "of {}: resume with the global batch it was trained with ({})",
                      state.epoch_samples, state.epoch, global_batch, state.global_batch));
    state.global_batch = global_batch;
    state.world_size = world;
    broadcast_model(/*buffers_only=*/false);
    // A fresh run's average starts from the weights every rank now shares; a resumed one has its own.
    if (ema && state.step == 0) *ema = WeightsEma(*model, config.train.ema_decay);
    if (config.dist.ledger)
      ledger = std::make_unique<LedgerWriter>(run_dir, segment.empty() ? "run" : segment, rank, world, state.step);
    if (!has_samples(data.val)) spdlog::warn("train: no validation samples: no evaluation, early stopping off");
    warn_if_epochs_leave_much_unread();
    if (state.step >= total_steps && state.step > 0)
      spdlog::info(
          "train: the run is already at step {} of its {}: nothing left to train (raise train.epochs or "
          "train.max_steps to train further)",
          state.step, total_steps);
    else if (is_main()) {
      progress.emplace("train", static_cast<std::uint64_t>(total_steps), "step", 30.0);
      progress->resume_at(static_cast<std::uint64_t>(state.step));
    }
    interval = Interval{};
    epoch_tally = Interval{};
    return group && config.dist.broadcast_buffers && !model->buffers().empty();
  }

  // Steps read whole global batches: the order's tail short of one is not read in an epoch. Said
  // up front when that is a tenth of the split or more (verify-ledger says it again afterwards).
  void warn_if_epochs_leave_much_unread() const {
    const auto samples = static_cast<std::int64_t>(train_loader->dataset_size());
    const std::int64_t tail = samples % global_batch;
    if (!is_main() || config.train.class_balance == ClassBalance::kSampler || tail * 10 < samples) return;
    spdlog::warn(
        "train: each epoch reads {} of the {} training samples: the other {} ({:.0f}%) are the tail of its order "
        "short of a whole global batch of {} (steps read whole global batches); a smaller global batch, or one "
        "that divides the split, uses more of them",
        samples - tail, samples, tail, 100.0 * static_cast<double>(tail) / static_cast<double>(samples), global_batch);
  }

  void train_epochs(bool sync_buffers) {
    bool stop = state.step >= total_steps;
    while (!stop && state.epoch < config.train.epochs) {
      // Resuming mid-epoch continues at the next unread global batch of the same order; this rank
      // skips its share of the steps already taken (whatever world size took them).
      const std::int64_t skip = state.epoch_samples / global_batch * config.train.accumulation_steps;
      train_loader->start_epoch(state.epoch, skip);
      if (ledger && is_main())
        ledger->epoch(state.epoch, steps_per_epoch, global_batch, train_loader->unread_sample_ids(),
                      config.train.class_balance == ClassBalance::kSampler);
      while (!stop) {
        apply_freeze_plan();
        // Waiting for the loader is training time: a loader-bound run must not report the step's
        // compute rate as its images/s (the GPU's batch study overstated its speed-up 3x that way).
        const auto fetch_start = std::chrono::steady_clock::now();
        const std::vector<Batch> micro = next_global_batch();
        if (micro.empty()) break;
        const double fetch_seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - fetch_start).count();
        state.train_seconds += fetch_seconds;
        input_wait_seconds += fetch_seconds;
        const StepResult r = train_step(micro, sync_buffers);
        account_step(r);
        stop = after_step_checks();
      }
      // The epoch is over when every micro-batch of it was consumed (a stop can land exactly there).
      if (skip + static_cast<std::int64_t>(train_loader->stats().batches) >= micro_batches_per_epoch)
        stop = finish_epoch() || stop;
    }
  }

  // This rank's micro-batches of the next global batch; empty at the end of the epoch.
  std::vector<Batch> next_global_batch() {
    std::vector<Batch> micro;
    while (static_cast<int>(micro.size()) < config.train.accumulation_steps) {
      auto batch = train_loader->next();
      if (!batch) break;
      micro.push_back(std::move(*batch));
    }
    return micro;
  }

  StepResult train_step(const std::vector<Batch>& micro, bool sync_buffers) {
    optim->set_lr_factor(schedule->factor(state.step));
    const auto step_start = std::chrono::steady_clock::now();
    if (sync_buffers) broadcast_model(/*buffers_only=*/true);
    StepResult r = run_step(micro);
    if (ema && r.applied) ema->update(*model, state.step);
    state.train_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count();
    state.step++;
    state.epoch_samples += r.samples;
    state.images_trained += r.samples;
    if (progress) progress->advance();
    if (after_step) after_step(state.step);  // before the ledger line: the latest a rank can die unrecorded
    if (ledger) {
      std::vector<std::uint64_t> ids;
      for (const auto& b : micro) ids.insert(ids.end(), b.sample_ids.begin(), b.sample_ids.end());
      ledger->step(state.epoch, state.step, ids);
    }
    if (group) stop_agreed = stop_agreed || r.stop_requested;
    return r;
  }

  // Divergence bookkeeping and the periodic line of the metric log.
  void account_step(const StepResult& r) {
    const bool bad_loss = !std::isfinite(r.loss);
    if (!r.applied) {
      // Under fp16 an overflow in the gradients is routine (the scaler backs off); a non-finite
      // loss, or any non-finite step without scaling, counts toward divergence.
      if (bad_loss || !step_runner->scaler().enabled()) state.bad_steps++;
      spdlog::debug("train: step {} skipped (non-finite {})", state.step, bad_loss ? "loss" : "gradients");
      if (state.bad_steps >= config.train.max_bad_steps) diverged(r);
    } else {
      state.bad_steps = 0;
      state.last_finite_loss = r.loss;
      state.last_finite_step = state.step;
      interval.loss += r.loss;
      interval.steps++;
      epoch_tally.loss += r.loss;
      epoch_tally.steps++;
    }
    interval.images += r.samples;
    epoch_tally.images += r.samples;
    if (state.step % config.train.log_every_steps == 0 || state.step == total_steps) log_interval(r);
  }

  void log_interval(const StepResult& r) {
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - interval.start).count();
    const double mean_loss = interval.steps ? interval.loss / interval.steps : std::nan("");
    std::vector<std::pair<std::string, double>> values{
        {"loss", mean_loss},
        {"lr", optim->head_lr()},
        {"images_per_second", secs > 0 ? interval.images / secs : 0.0},
        {"skipped_steps", static_cast<double>(step_runner->scaler().skipped_steps())},
        {"data_wait_seconds", train_loader->stats().wait_seconds}};
    if (step_runner->scaler().enabled()) values.emplace_back("loss_scale", step_runner->scaler().scale());
    if (train_loader->stats().padded_tokens > 0)
      values.emplace_back("padding_fraction", train_loader->stats().padding_fraction());
    if (state.oom_retries > 0) {
      values.emplace_back("oom_retries", static_cast<double>(state.oom_retries));
      values.emplace_back("micro_batch", static_cast<double>(effective_micro_batch()));
    }
    if (r.grad_norm >= 0) values.emplace_back("grad_norm", r.grad_norm);
    if (log) log->record(state.step, epoch_progress(), "train", values);
    if (progress)
      progress->set_suffix(fmt::format("loss (last {}) {}  lr {:.3g}", count_of(interval.steps, "step"),
                                       fmt_metric(mean_loss), optim->head_lr()));
    interval = Interval{};
  }

  // Evaluation and checkpoint on their step schedules; returns whether training stops here.
  bool after_step_checks() {
    if (should_stop()) stop_for_interrupt();
    const bool eval_now = config.train.eval_every_steps > 0 && state.step % config.train.eval_every_steps == 0;
    bool best = false;
    if (eval_now) {
      best = validate();
      if (should_stop()) stop_for_interrupt();
    }
    const int every = config.train.checkpoint_every_steps;
    const bool ckpt_now = (every > 0 && state.step % every == 0) || (every == 0 && eval_now);
    if (ckpt_now || best) checkpoint(best);
    bool stop = patience_exhausted();
    if (state.step >= total_steps) {
      if (config.train.max_steps > 0 && state.step >= config.train.max_steps) stop_reason = "max_steps";
      stop = true;
    }
    return stop;
  }

  // Counts the epoch; evaluates and checkpoints when evaluation is per epoch. Returns whether
  // early stopping ends training here.
  bool finish_epoch() {
    state.epoch++;
    state.epoch_samples = 0;
    log_epoch();
    if (config.train.eval_every_steps != 0 || stop_reason == "early_stopped") return false;
    const bool best = validate();
    if (should_stop()) stop_for_interrupt();
    checkpoint(best);
    return patience_exhausted();
  }

  // One line per epoch on the console and in the log file, terminal or not (the bar is only drawn
  // on a terminal): mean training loss, throughput, and the time left at this epoch's pace. The
  // progress line's loss is the last log interval's, so each says which it is.
  void log_epoch() {
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_tally.start).count();
    const double steps_per_second = secs > 0 ? epoch_tally.steps / secs : 0.0;
    const double eta = steps_per_second > 0 ? static_cast<double>(total_steps - state.step) / steps_per_second : 0.0;
    if (is_main())
      spdlog::info("train: epoch {}/{} done at step {}/{}: train loss (epoch mean) {}, {}, eta {}", state.epoch,
                   config.train.epochs, state.step, total_steps,
                   fmt_metric(epoch_tally.steps ? epoch_tally.loss / epoch_tally.steps : std::nan("")),
                   epoch_rate_text(secs), format_duration(eta));
    epoch_tally = Interval{};
  }

  // "123.4 img/s", or for a text model "123.4 samples/s, 5678 tokens/s" (real tokens, this rank's
  // when there are several).
  std::string epoch_rate_text(double secs) const {
    const double samples_per_second = secs > 0 ? epoch_tally.images / secs : 0.0;
    if (!model->is_text()) return fmt::format("{:.1f} img/s", samples_per_second);
    return fmt::format("{:.1f} samples/s, {:.0f} tokens/s{}", samples_per_second,
                       secs > 0 ? epoch_tally.tokens / secs : 0.0, world > 1 ? " (this rank)" : "");
  }

  bool patience_exhausted() {
    if (config.train.patience <= 0 || state.evals_without_improvement < config.train.patience) return false;
    stop_reason = "early_stopped";
    return true;
  }

  // The test split is scored with the best weights, as a user would deploy them. Null without one.
  json test_with_best_weights() {
    if (!has_samples(data.test)) return nullptr;
    // Training is over: its gradients only take memory the best weights are about to need.
    for (auto& p : model->parameters()) p.mutable_grad() = at::Tensor();
    const bool from_checkpoint = state.best_step && *state.best_step != state.step;
    if (from_checkpoint) {
      // Rank 0 reads the best checkpoint and hands the weights on: other nodes may not share its disk.
      // With EMA the best is the EMA's (validation scored it), so those are the weights tested.
      if (is_main() && fs::exists(store->best_path()))
        restore_model_weights(*model, read_checkpoint(store->best_path()).tensors,
                              ema ? CheckpointWeights::kEmaIfPresent : CheckpointWeights::kRaw);
      broadcast_model(/*buffers_only=*/false);
      spdlog::info("test: using the best {}weights (step {})", ema ? "EMA " : "", *state.best_step);
    }
    EmaInModel in_model(from_checkpoint ? nullptr : ema.get(), *model);
    EvalResult r = evaluate(data.test, ema ? "test (EMA weights)" : "test");
    if (should_stop()) throw InterruptedError();
    log_eval(r, "test");
    if (is_main()) write_file_atomic(run_dir / "test_report.md", report_to_markdown(r.report, data.class_names));
    return eval_record(r, "test");
  }

  json summary_record(const json& test_json, double wall) const {
    json summary = {
        {"status", stop_reason},
        {"model", config.model.name},
        {"precision", precision_name(precision)},
        {"device", cuda ? "cuda" : "cpu"},
        {"threads", resolve_threads(config.run.threads)},
        {"micro_batch", config.loader.batch_size},
        {"micro_batch_effective", effective_micro_batch()},
        {"oom_retries", state.oom_retries},
        {"accumulation_steps", config.train.accumulation_steps},
        {"global_batch", global_batch},
        {"world_size", world},
        {"steps", state.step},
        {"epochs", epoch_progress()},
        {"images_trained", state.images_trained},
        {"train_seconds", state.train_seconds},
        {"wall_seconds_this_process", wall},
        {"input_wait_seconds_this_process", input_wait_seconds},
        {"images_per_second", state.train_seconds > 0 ? state.images_trained / state.train_seconds : 0.0},
        {"skipped_steps", step_runner->scaler().skipped_steps()},
        {"weights_evaluated", ema ? "ema" : "raw"},
        {"peak_rss_bytes", peak_rss_bytes()},
        {"program_resident_bytes", program.resident},
        {"job_peak_bytes", job_peak_measured ? json(job_resident_peak(program)) : json(nullptr)},
        {"micro_batches_this_process", micro_batches_run},
        {"best",
         {{"metric", state.best_metric},
          {"value", state.best_step && std::isfinite(state.best_value) ? json(state.best_value) : json(nullptr)},
          {"step", state.best_step ? json(*state.best_step) : json(nullptr)},
          {"checkpoint", store->best_path().string()}}},
        {"final_val", state.history.empty() ? json(nullptr) : state.history.back()},
        {"test", test_json},
        {"test_macro_f1", test_json.is_null() ? json(nullptr) : test_json["macro_f1"]},
        {"test_roc_auc",
         test_json.is_object() && test_json.contains("binary") ? test_json["binary"]["roc_auc"] : json(nullptr)},
        {"classes", data.class_names},
        {"commit", build_commit()},
        {"torch", torch_version()},
    };
    if (padded_tokens > 0) summary["tokens"] = token_record();
    if (reducer) {
      const auto& st = reducer->stats();
      summary["dist"] = {{"backend", group->backend()},
                         {"buckets", st.buckets},
                         {"gradient_bytes_per_step", st.bytes_per_step},
                         {"buckets_started_during_backward", st.launched_during_backward},
                         {"exposed_wait_seconds", st.wait_seconds},
                         {"bucket_mb", config.dist.bucket_mb}};
    }
    return summary;
  }

  json token_record() const {
    const double this_process_seconds = state.train_seconds - train_seconds_at_start;
    return {{"padded", padded_tokens},
            {"real", real_tokens},
            {"padding_fraction", 1.0 - static_cast<double>(real_tokens) / static_cast<double>(padded_tokens)},
            {"tokens_per_second_this_process", this_process_seconds > 0 ? real_tokens / this_process_seconds : 0.0},
            {"token_budget", config.loader.token_budget},
            {"bucket_by_length", config.text.bucket_by_length}};
  }

  void log_summary(const json& summary, const json& test_json) const {
    spdlog::info("train: {} after {}; best {} {} at step {}; test macro-F1 {}{}; {:.1f} {}; summary: {}", stop_reason,
                 count_of(state.step, "step"), state.best_metric, fmt_metric(state.best_value),
                 state.best_step ? std::to_string(*state.best_step) : "-",
                 test_json.is_null() ? "-" : fmt_metric(test_json["macro_f1"].get<double>()),
                 summary["test_roc_auc"].is_number()
                     ? fmt::format(", ROC AUC {}", fmt_metric(summary["test_roc_auc"].get<double>()))
                     : std::string(),
                 summary["images_per_second"].get<double>(), model->is_text() ? "samples/s" : "img/s",
                 (run_dir / "summary.json").string());
    warn_if_the_job_outgrew_its_budget(summary);
  }

  // On CPU the budget caps LibTorch's tensors; oneDNN's cached primitives, decoder and allocator
  // buffers come on top. Say so when the job's resident peak went past the budget.
  void warn_if_the_job_outgrew_its_budget(const json& summary) const {
    if (cuda || !config.train.memory_budget.is_set() || !summary["job_peak_bytes"].is_number()) return;
    const double budget = static_cast<double>(config.train.memory_budget.bytes);
    const double peak = summary["job_peak_bytes"].get<double>();
    if (peak <= budget) return;
    spdlog::warn(
        "train: the job's resident memory peaked at {}, over train.memory_budget {}: the budget caps "
        "LibTorch's tensors, and oneDNN's cached primitives, decoder and allocator buffers came on top "
        "(docs/FIND_BATCH.md); lower the budget by the difference to keep the process within it",
        format_bytes(peak), format_bytes(budget));
  }
};

Trainer::Trainer(Config config, std::shared_ptr<Classifier> model, TrainData data, fs::path run_dir,
                 std::shared_ptr<ProcessGroup> group, std::string segment)
    : impl_(std::make_unique<Impl>(std::move(config), std::move(model), std::move(data), std::move(run_dir),
                                   std::move(group), std::move(segment))) {}

Trainer::~Trainer() = default;

void Trainer::resume(const Checkpoint& checkpoint) {
  auto& s = *impl_;
  restore_state(checkpoint, s.config, *s.model, s.data.class_names, s.optim->optimizer(), s.step_runner->scaler(),
                s.state, s.ema.get());
  s.last_checkpoint_step = s.state.step;
  s.resumed = true;
  if (s.log) s.log->truncate_after(s.state.step);
  spdlog::info("train: resumed from {} (step {}, epoch {}, {} samples into it)", checkpoint.path.string(), s.state.step,
               s.state.epoch, s.state.epoch_samples);
}

nlohmann::json Trainer::fit() { return impl_->fit(); }

void Trainer::set_after_step(std::function<void(std::int64_t)> hook) { impl_->after_step = std::move(hook); }

}  // namespace shoplens
