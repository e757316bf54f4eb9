#include "run_summary.h"

#include <torch/torch.h>

#include <cmath>

#include <spdlog/spdlog.h>

#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/plural.h"
#include "shoplens/core/runtime.h"
#include "shoplens/core/strings.h"
#include "shoplens/models/classifier.h"

namespace shoplens {
using json = nlohmann::json;

json token_record(const TokenTally& tokens, std::int64_t token_budget, bool bucket_by_length) {
  return {
      {"padded", tokens.padded},
      {"real", tokens.real},
      {"padding_fraction", 1.0 - static_cast<double>(tokens.real) / static_cast<double>(tokens.padded)},
      {"tokens_per_second_this_process", tokens.seconds > 0 ? static_cast<double>(tokens.real) / tokens.seconds : 0.0},
      {"token_budget", token_budget},
      {"bucket_by_length", bucket_by_length}};
}

// On CPU the budget caps LibTorch's tensors; oneDNN's cached primitives, decoder and allocator
// buffers come on top. Say so when the job's resident peak went past the budget.
std::optional<std::string> budget_overrun_warning(const json& summary, ByteSize budget, bool cuda) {
  if (cuda || !budget.is_set() || !summary["job_peak_bytes"].is_number()) return std::nullopt;
  const auto budget_bytes = static_cast<double>(budget.bytes);
  const double peak = summary["job_peak_bytes"].get<double>();
  if (peak <= budget_bytes) return std::nullopt;
  return fmt::format(
      "train: the job's resident memory peaked at {}, over train.memory_budget {}: the budget caps "
      "LibTorch's tensors, and oneDNN's cached primitives, decoder and allocator buffers came on top "
      "(docs/FIND_BATCH.md); lower the budget by the difference to keep the process within it",
      format_bytes(peak), format_bytes(budget_bytes));
}

json test_with_best_weights(TrainerRun& run, Evaluator& evaluator, TrainerCheckpoints& checkpoints) {
  if (!has_samples(run.data.test)) return nullptr;
  // Training is over: its gradients only take memory the best weights are about to need.
  for (auto& p : run.model->parameters()) p.mutable_grad() = at::Tensor();
  const bool from_checkpoint = checkpoints.load_best_weights();
  EmaInModel in_model(from_checkpoint ? nullptr : run.ema.get(), *run.model);
  EvalResult r = evaluator.evaluate(run.data.test, run.ema ? "test (EMA weights)" : "test");
  if (run.should_stop()) throw InterruptedError();
  evaluator.log_eval(r, "test");
  if (run.is_main())
    write_file_atomic(run.run_dir / "test_report.md", report_to_markdown(r.report, run.data.class_names));
  return evaluator.record(r, "test");
}

namespace {

json best_record(const TrainerRun& run) {
  const auto& state = run.state;
  return {{"metric", state.best_metric},
          {"value", state.best_step && std::isfinite(state.best_value) ? json(state.best_value) : json(nullptr)},
          {"step", state.best_step ? json(*state.best_step) : json(nullptr)},
          {"checkpoint", run.store->best_path().string()}};
}

// Device-to-host reads of this process's training steps and loop (HostReads): the steps that
// neither logged, evaluated nor checkpointed should show none (docs/TRAINING.md).
json host_reads_record(const TrainerRun& run) {
  auto& reads = run.step_runner->host_reads();
  return {{"total", reads.total()},
          {"loss", reads.count(HostRead::kLoss)},
          {"outcome", reads.count(HostRead::kOutcome)},
          {"grad_norm", reads.count(HostRead::kGradNorm)},
          {"loss_scale_check", reads.count(HostRead::kLossScaleCheck)},
          {"tally", reads.count(HostRead::kTally)},
          {"quiet_steps", run.quiet_steps},
          {"reads_in_quiet_steps", run.quiet_step_reads}};
}

// train.cuda_graph: whether the steps were replayed from a graph, and why not.
json cuda_graph_record(const TrainerRun& run) {
  const bool captured = run.captured_step && run.captured_step->captured();
  return {{"captured", captured},
          {"reason", captured ? json(nullptr)
                              : json(run.captured_step ? "the run ended before the capture" : run.cuda_graph_refusal)}};
}

json dist_record(const TrainerRun& run) {
  const auto& st = run.reducer->stats();
  return {{"backend", run.group->backend()},
          {"buckets", st.buckets},
          {"gradient_bytes_per_step", st.bytes_per_step},
          {"buckets_started_during_backward", st.launched_during_backward},
          {"exposed_wait_seconds", st.wait_seconds},
          {"bucket_mb", run.config.dist.bucket_mb}};
}

}  // namespace

json summary_record(const TrainerRun& run, const json& test_json, double wall) {
  const auto& state = run.state;
  const auto& config = run.config;
  json summary = {
      {"status", run.stop_reason},
      {"model", config.model.name},
      {"precision", precision_name(run.precision)},
      {"device", run.cuda ? "cuda" : "cpu"},
      {"threads", resolve_threads(config.run.threads)},
      {"micro_batch", config.loader.batch_size},
      {"micro_batch_effective", run.effective_micro_batch()},
      {"oom_retries", state.oom_retries},
      {"accumulation_steps", config.train.accumulation_steps},
      {"global_batch", run.global_batch},
      {"world_size", run.world},
      {"steps", state.step},
      {"epochs", run.epoch_progress()},
      {"images_trained", state.images_trained},
      {"train_seconds", state.train_seconds},
      {"wall_seconds_this_process", wall},
      {"input_wait_seconds_this_process", run.input_wait_seconds},
      {"images_per_second", state.train_seconds > 0 ? state.images_trained / state.train_seconds : 0.0},
      {"skipped_steps", run.step_runner->scaler().skipped_steps()},
      {"host_reads", host_reads_record(run)},
      {"cuda_graph", cuda_graph_record(run)},
      {"weights_evaluated", run.ema ? "ema" : "raw"},
      {"peak_rss_bytes", peak_rss_bytes()},
      {"program_resident_bytes", run.program.resident},
      {"job_peak_bytes", run.job_peak_measured ? json(job_resident_peak(run.program)) : json(nullptr)},
      {"micro_batches_this_process", run.micro_batches_run},
      {"best", best_record(run)},
      {"final_val", state.history.empty() ? json(nullptr) : state.history.back()},
      {"test", test_json},
      {"test_macro_f1", test_json.is_null() ? json(nullptr) : test_json["macro_f1"]},
      {"test_roc_auc",
       test_json.is_object() && test_json.contains("binary") ? test_json["binary"]["roc_auc"] : json(nullptr)},
      {"classes", run.data.class_names},
      {"commit", build_commit()},
      {"torch", torch_version()},
  };
  if (run.padded_tokens > 0)
    summary["tokens"] =
        token_record({run.padded_tokens, run.real_tokens, state.train_seconds - run.train_seconds_at_start},
                     config.loader.token_budget, config.text.bucket_by_length);
  if (run.reducer) summary["dist"] = dist_record(run);
  return summary;
}

void log_summary(const TrainerRun& run, const json& summary, const json& test_json) {
  const auto& state = run.state;
  spdlog::info("train: {} after {}; best {} {} at step {}; test macro-F1 {}{}; {:.1f} {}; summary: {}", run.stop_reason,
               count_of(state.step, "step"), state.best_metric, fmt_metric(state.best_value),
               state.best_step ? std::to_string(*state.best_step) : "-",
               test_json.is_null() ? "-" : fmt_metric(test_json["macro_f1"].get<double>()),
               summary["test_roc_auc"].is_number()
                   ? fmt::format(", ROC AUC {}", fmt_metric(summary["test_roc_auc"].get<double>()))
                   : std::string(),
               summary["images_per_second"].get<double>(), run.model->is_text() ? "samples/s" : "img/s",
               (run.run_dir / "summary.json").string());
  if (auto warning = budget_overrun_warning(summary, run.config.train.memory_budget, run.cuda))
    spdlog::warn("{}", *warning);
}

}  // namespace shoplens
