#include "trainer_evaluator.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>

#include <spdlog/spdlog.h>

#include "shoplens/core/errors.h"
#include "shoplens/core/runtime.h"
#include "shoplens/data/loader.h"
#include "shoplens/models/classifier.h"
#include "shoplens/train/amp.h"

namespace shoplens {
using json = nlohmann::json;

std::vector<double> pack_tally(const EvalTally& tally, bool interrupted) {
  const auto& counts = tally.confusion.counts();
  std::vector<double> totals(counts.begin(), counts.end());
  totals.push_back(tally.loss_sum);
  totals.push_back(static_cast<double>(tally.samples));
  totals.push_back(interrupted ? 1.0 : 0.0);
  return totals;
}

bool unpack_tally(EvalTally& tally, const std::vector<double>& totals) {
  const int k = tally.confusion.num_classes();
  const auto cells = static_cast<std::size_t>(k) * static_cast<std::size_t>(k);
  if (totals.size() != cells + 3) throw Error("evaluation tallies of different sizes cannot be merged");
  ConfusionMatrix merged(k);
  for (int label = 0; label < k; ++label)
    for (int predicted = 0; predicted < k; ++predicted)
      merged.add(label, predicted, static_cast<std::int64_t>(totals[label * k + predicted]));
  tally.confusion = merged;
  tally.loss_sum = totals[cells];
  tally.samples = static_cast<std::int64_t>(totals[cells + 1]);
  return totals[cells + 2] > 0;
}

EvalResult eval_result(const EvalTally& tally, double threshold, double seconds) {
  EvalResult result;
  result.report = classification_report(tally.confusion);
  if (tally.confusion.num_classes() == 2 && !tally.scores.empty())
    result.binary = binary_metrics(tally.scores, tally.score_labels, threshold);
  result.loss = tally.samples ? tally.loss_sum / static_cast<double>(tally.samples) : std::nan("");
  result.seconds = seconds;
  return result;
}

json eval_record(const EvalResult& r, const std::string& phase, const std::vector<std::string>& class_names,
                 std::int64_t step, double epoch) {
  json rec = report_to_json(r.report, class_names);
  rec["phase"] = phase;
  rec["step"] = step;
  rec["epoch"] = epoch;
  rec["loss"] = std::isfinite(r.loss) ? json(r.loss) : json(nullptr);
  if (r.binary) rec["binary"] = binary_metrics_to_json(*r.binary);
  return rec;
}

std::vector<std::pair<std::string, double>> eval_log_values(const EvalResult& r, const EvalResult* raw,
                                                            double train_seconds) {
  std::vector<std::pair<std::string, double>> values{
      {"loss", r.loss},
      {"accuracy", r.report.accuracy},
      {"macro_f1", r.report.macro_f1},
      {"weighted_f1", r.report.weighted_f1},
      {"macro_precision", r.report.macro_precision},
      {"macro_recall", r.report.macro_recall},
      // Training time so far: time-to-accuracy comparisons (the batch study) read it.
      {"train_seconds", train_seconds}};
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
  return values;
}

bool record_validation(TrainState& state, double value, bool higher_is_better) {
  const bool improved =
      !state.best_step.has_value() ||
      (std::isfinite(value) && (higher_is_better ? value > state.best_value : value < state.best_value));
  if (improved) {
    state.best_value = value;
    state.best_step = state.step;
    state.evals_without_improvement = 0;
  } else {
    state.evals_without_improvement++;
  }
  return improved;
}

// Evaluation at the configured batch; when it runs out of memory (a larger eval batch than
// planned, another process on the device), again from the start at half the batch.
EvalResult Evaluator::evaluate(const std::shared_ptr<const SampleSource>& source, const std::string& what) {
  const auto& train = run_.config.train;
  int batch = train.eval_batch_size > 0 ? train.eval_batch_size : run_.config.loader.batch_size;
  if (eval_batch_limit_ > 0) batch = std::min(batch, eval_batch_limit_);
  for (;;) {
    try {
      return evaluate_at(source, what, batch);
    } catch (const std::exception& e) {
      run_.model->train();
      if (!is_out_of_memory(e) || !train.oom_recovery || batch <= 1) throw;
      spdlog::warn("{}: out of memory at evaluation batch {}: evaluating again at {}", what, batch, (batch + 1) / 2);
      batch = (batch + 1) / 2;
      eval_batch_limit_ = batch;
      run_.state.oom_retries++;
    }
  }
}

EvalResult Evaluator::evaluate_at(const std::shared_ptr<const SampleSource>& source, const std::string& what,
                                  int batch) {
  const auto start = std::chrono::steady_clock::now();
  auto options = loader_options_from_config(run_.config, /*train=*/false);
  options.batch_size = batch;
  // Each rank scores every world-th sample: the whole split once, no padding counted twice.
  if (run_.group) {
    options.strided_share = true;
    options.rank = run_.rank;
    options.world_size = run_.world;
  }
  std::unique_ptr<Loader> loader;
  if (strided_share_size(source->size(), run_.rank, run_.world) > 0) {
    loader = run_.make_loader(source, options);
    loader->start_epoch(0);
  }
  EvalTally tally(run_.model->num_classes());
  run_.model->eval();
  {
    torch::NoGradGuard no_grad;
    while (loader) {
      auto next = loader->next();
      if (!next) break;
      if (interrupt_requested()) break;  // the caller checkpoints and stops
      tally_batch(tally, *next);
    }
  }
  run_.model->train();
  if (run_.group) merge_ranks(tally, source->size());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EvalResult result = eval_result(tally, run_.config.train.threshold, seconds);
  spdlog::info("{}: step {}: loss {} accuracy {} macro-F1 {}{} ({} samples, {:.1f} s)", what, run_.state.step,
               fmt_metric(result.loss), fmt_metric(result.report.accuracy), fmt_metric(result.report.macro_f1),
               result.binary ? fmt::format(" ROC AUC {} PR AUC {}", fmt_metric(result.binary->roc_auc),
                                           fmt_metric(result.binary->pr_auc))
                             : std::string(),
               tally.samples, result.seconds);
  return result;
}

void Evaluator::tally_batch(EvalTally& tally, const Batch& batch) {
  const auto device = run_.cuda ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
  const bool binary = run_.model->num_classes() == 2;
  at::Tensor logits;
  {
    AutocastScope autocast(run_.cuda, run_.precision);
    logits = run_.model->forward_batch(batch, device);
  }
  auto losses = per_sample_loss(logits, batch.labels, at::Tensor(), at::Tensor(), 0.0);
  tally.loss_sum += losses.sum().item<double>();
  at::Tensor predicted;
  if (binary) {
    const auto p1 =
        torch::softmax(logits.to(torch::kFloat), 1).select(1, 1).to(torch::kCPU, torch::kDouble).contiguous();
    predicted = p1.ge(run_.config.train.threshold).to(torch::kLong);
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
void Evaluator::merge_ranks(EvalTally& tally, std::size_t split_size) {
  const std::vector<double> packed = pack_tally(tally, interrupt_requested());
  auto totals = torch::tensor(packed, torch::kDouble);
  std::vector<at::Tensor> tensors{totals};
  run_.group->allreduce_sum(tensors);
  const double* t = totals.data_ptr<double>();
  const bool stop = unpack_tally(tally, std::vector<double>(t, t + packed.size()));
  run_.stop_agreed = run_.stop_agreed || stop;
  if (tally.confusion.num_classes() == 2) gather_scores(split_size, tally.scores, tally.score_labels);
}

// Every rank ends with the whole split's (score, label) pairs: rank r's strided share goes at
// the offset of the shares before it, and one all-reduce sums the disjoint pieces.
void Evaluator::gather_scores(std::size_t split_size, std::vector<double>& scores, std::vector<int>& labels) {
  std::size_t offset = 0;
  for (int r = 0; r < run_.rank; ++r) offset += strided_share_size(split_size, r, run_.world);
  auto all = torch::zeros({static_cast<std::int64_t>(split_size), 2}, torch::kDouble);
  auto* a = all.data_ptr<double>();
  for (std::size_t i = 0; i < scores.size(); ++i) {
    a[2 * (offset + i)] = scores[i];
    a[2 * (offset + i) + 1] = labels[i];
  }
  std::vector<at::Tensor> tensors{all};
  run_.group->allreduce_sum(tensors);
  scores.resize(split_size);
  labels.resize(split_size);
  for (std::size_t i = 0; i < split_size; ++i) {
    scores[i] = a[2 * i];
    labels[i] = static_cast<int>(a[2 * i + 1]);
  }
}

json Evaluator::record(const EvalResult& r, const std::string& phase) const {
  return eval_record(r, phase, run_.data.class_names, run_.state.step, run_.epoch_progress());
}

void Evaluator::log_eval(const EvalResult& r, const std::string& phase, const EvalResult* raw) {
  if (!run_.log) return;
  run_.log->record(run_.state.step, run_.epoch_progress(), phase, eval_log_values(r, raw, run_.state.train_seconds));
}

bool Evaluator::validate() {
  if (!has_samples(run_.data.val)) return true;
  std::optional<EvalResult> raw;
  if (run_.ema) {
    raw = evaluate(run_.data.val, "val (raw weights)");
    if (run_.should_stop()) return false;
  }
  EvalResult r = evaluate_ema(run_.data.val, "val");
  if (run_.should_stop()) return false;
  // With EMA the validation (and so the best checkpoint) is the EMA's; the raw weights' scores
  // sit beside it for comparison.
  log_eval(r, "val", raw ? &*raw : nullptr);
  json rec = record(r, "val");
  if (raw) {
    rec["weights"] = "ema";
    rec["raw"] = {{"macro_f1", raw->report.macro_f1},
                  {"accuracy", raw->report.accuracy},
                  {"loss", std::isfinite(raw->loss) ? json(raw->loss) : json(nullptr)}};
  }
  auto& state = run_.state;
  state.history.push_back(rec);
  const double value = metric_value(r.report, r.loss, state.best_metric, r.binary ? &*r.binary : nullptr);
  return record_validation(state, value, metric_higher_is_better(state.best_metric));
}

EvalResult Evaluator::evaluate_ema(const std::shared_ptr<const SampleSource>& source, const std::string& what) {
  EmaInModel in_model(run_.ema.get(), *run_.model);
  return evaluate(source, run_.ema ? what + " (EMA weights)" : what);
}

}  // namespace shoplens
