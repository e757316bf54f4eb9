// The trainer's units one at a time over a TrainerRun on in-memory data: the evaluator, the
// checkpoints, the run summary and the loop (the whole trainer: test_train.cpp).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <cmath>
#include <filesystem>

#include "shoplens/core/errors.h"
#include "shoplens/models/classifier.h"
#include "test_util.h"
#include "train/run_summary.h"
#include "train/train_loop.h"
#include "train/trainer_checkpoints.h"
#include "train/trainer_evaluator.h"
#include "train/trainer_run.h"
#include "train_test_util.h"

namespace shoplens {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using testing::sgd_skipping_on_device;
using ::testing::ThrowsMessage;
using testing::tiny_config;
using testing::tiny_data;
using testing::tiny_model;

std::unique_ptr<TrainerRun> tiny_run(const std::filesystem::path& dir, Config config, TrainData data = tiny_data()) {
  auto model = tiny_model(config);
  return std::make_unique<TrainerRun>(std::move(config), std::move(model), std::move(data), dir, nullptr, "");
}

// ---- the evaluator ----

TEST(TrainerEvaluator, RanksTalliesSumToTheWholeSplit) {
  EvalTally a(2), b(2);
  a.confusion.add(0, 0, 3);
  a.confusion.add(1, 0, 1);
  a.loss_sum = 2.0;
  a.samples = 4;
  b.confusion.add(1, 1, 5);
  b.loss_sum = 1.0;
  b.samples = 5;
  std::vector<double> sum = pack_tally(a, false);
  const std::vector<double> other = pack_tally(b, true);
  for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += other[i];
  EvalTally merged(2);
  EXPECT_TRUE(unpack_tally(merged, sum));  // rank b saw an interrupt: every rank stops
  EXPECT_EQ(merged.confusion.counts(), (std::vector<std::int64_t>{3, 0, 1, 5}));
  EXPECT_EQ(merged.samples, 9);
  const EvalResult r = eval_result(merged, 0.5, 1.0);
  EXPECT_NEAR(r.loss, 3.0 / 9.0, 1e-12);
  EXPECT_NEAR(r.report.accuracy, 8.0 / 9.0, 1e-12);
  EXPECT_FALSE(unpack_tally(merged, pack_tally(a, false)));
  EXPECT_THROW(unpack_tally(merged, {1.0, 2.0}), Error);
}

TEST(TrainerEvaluator, RecordsAndLogValuesNameTheRawWeightsBesideTheEma) {
  EvalResult r;
  r.loss = std::nan("");
  ConfusionMatrix confusion(2);
  confusion.add(0, 0, 3);
  confusion.add(1, 0, 1);
  r.report = classification_report(confusion);
  EvalResult raw;
  raw.loss = 0.5;
  raw.report.macro_f1 = 0.25;
  const json rec = eval_record(r, "val", {"a", "b"}, 12, 1.5);
  EXPECT_EQ(rec["phase"], "val");
  EXPECT_EQ(rec["step"], 12);
  EXPECT_TRUE(rec["loss"].is_null());  // a non-finite loss is null, not NaN, in JSON
  EXPECT_FALSE(rec.contains("binary"));
  EXPECT_EQ(rec["accuracy"], 0.75);
  const auto values = eval_log_values(r, &raw, 7.0);
  const auto find = [&](const std::string& name) {
    for (const auto& [key, value] : values)
      if (key == name) return value;
    return -1.0;
  };
  EXPECT_EQ(find("train_seconds"), 7.0);
  EXPECT_EQ(find("raw_loss"), 0.5);
  EXPECT_EQ(find("raw_macro_f1"), 0.25);
  EXPECT_EQ(eval_log_values(r, nullptr, 7.0).size(), 7u);
}

TEST(TrainerEvaluator, ValidationKeepsTheBestAndCountsPatience) {
  TrainState state;
  state.step = 1;
  EXPECT_TRUE(record_validation(state, 0.2, true));  // the first is the best
  state.step = 2;
  EXPECT_TRUE(record_validation(state, 0.5, true));
  EXPECT_EQ(*state.best_step, 2);
  state.step = 3;
  EXPECT_FALSE(record_validation(state, 0.4, true));
  EXPECT_FALSE(record_validation(state, std::nan(""), true));
  EXPECT_EQ(state.evals_without_improvement, 2);
  state.step = 4;
  EXPECT_TRUE(record_validation(state, 0.3, /*higher_is_better=*/false));  // a loss: lower wins
  EXPECT_EQ(state.evals_without_improvement, 0);
  EXPECT_EQ(state.best_value, 0.3);
}

TEST(TrainerEvaluator, ScoresTheWholeSplitAndRecordsTheValidation) {
  testing::ScratchDir dir("trainer-evaluator");
  auto run = tiny_run(dir.path(), tiny_config(dir.path()));
  Evaluator evaluator(*run);
  const EvalResult r = evaluator.evaluate(run->data.val, "val");
  EXPECT_EQ(r.report.samples, 9);
  EXPECT_TRUE(std::isfinite(r.loss));
  EXPECT_TRUE(evaluator.validate());
  ASSERT_EQ(run->state.history.size(), 1u);
  EXPECT_EQ(run->state.history[0]["phase"], "val");
  EXPECT_TRUE(run->model->is_training());  // evaluation hands the model back in training mode
}

// ---- checkpoints ----

TEST(TrainerCheckpoints, DueOnTheirScheduleOrWithEveryEvaluation) {
  EXPECT_TRUE(checkpoint_due(6, 3, false, false));
  EXPECT_FALSE(checkpoint_due(7, 3, true, false));
  EXPECT_TRUE(checkpoint_due(7, 3, false, /*best=*/true));
  EXPECT_TRUE(checkpoint_due(7, 0, /*evaluated_now=*/true, false));
  EXPECT_FALSE(checkpoint_due(7, 0, false, false));
  EXPECT_FALSE(checkpoint_due(7, -1, true, false));  // negative: only the best and the last
}

TEST(TrainerCheckpoints, SaveKeepsTheLastAndTheBestAndResumeRestoresTheStep) {
  testing::ScratchDir dir("trainer-checkpoints");
  Config config = tiny_config(dir.path());
  config.train.keep_last = 1;
  auto run = tiny_run(dir.path(), config);
  TrainerCheckpoints checkpoints(*run);
  EXPECT_FALSE(checkpoints.saved_current_step());
  EXPECT_EQ(checkpoints.last_good(), "");
  run->state.step = 2;
  checkpoints.save(/*is_best=*/true);
  run->state.step = 5;
  checkpoints.save(false);
  EXPECT_TRUE(checkpoints.saved_current_step());
  ASSERT_EQ(run->store->list().size(), 1u);
  EXPECT_THAT(checkpoints.last_good(), HasSubstr("step-000000000005.ckpt"));
  EXPECT_EQ(read_checkpoint(run->store->best_path()).state["step"], 2);

  auto resumed = tiny_run(dir.path() / "again", config);
  TrainerCheckpoints again(*resumed);
  again.resume(read_checkpoint(run->store->list().back()));
  EXPECT_EQ(resumed->state.step, 5);
  EXPECT_TRUE(resumed->resumed);
  EXPECT_TRUE(again.saved_current_step());
  // The best weights are step 2's, not the current ones: they are loaded.
  run->state.best_step = 2;
  EXPECT_TRUE(checkpoints.load_best_weights());
  run->state.best_step = 5;
  EXPECT_FALSE(checkpoints.load_best_weights());
}

TEST(TrainerCheckpoints, InterruptWritesTheStepAndThrows) {
  testing::ScratchDir dir("trainer-interrupt");
  auto run = tiny_run(dir.path(), tiny_config(dir.path()));
  TrainerCheckpoints checkpoints(*run);
  run->state.step = 4;
  EXPECT_THROW(checkpoints.stop_for_interrupt(), InterruptedError);
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "checkpoints" / "step-000000000004.ckpt"));
}

// ---- the run summary ----

TEST(TrainerSummary, TokenRecordAndBudgetWarning) {
  const json tokens = token_record({100, 75, 5.0}, 4096, true);
  EXPECT_EQ(tokens["padding_fraction"], 0.25);
  EXPECT_EQ(tokens["tokens_per_second_this_process"], 15.0);
  EXPECT_EQ(tokens["token_budget"], 4096);
  EXPECT_EQ(token_record({100, 75, 0.0}, 0, false)["tokens_per_second_this_process"], 0.0);

  const json summary = {{"job_peak_bytes", 3000.0}};
  EXPECT_FALSE(budget_overrun_warning(summary, ByteSize{}, false));      // no budget
  EXPECT_FALSE(budget_overrun_warning(summary, ByteSize{4000}, false));  // within it
  EXPECT_FALSE(budget_overrun_warning(summary, ByteSize{2000}, true));   // CUDA: the allocator's cap
  EXPECT_FALSE(budget_overrun_warning({{"job_peak_bytes", nullptr}}, ByteSize{2000}, false));  // not measured
  const auto warning = budget_overrun_warning(summary, ByteSize{2000}, false);
  ASSERT_TRUE(warning);
  EXPECT_THAT(*warning, HasSubstr("train.memory_budget"));
}

TEST(TrainerSummary, RecordOfARunAndTheTestWithTheBestWeights) {
  testing::ScratchDir dir("trainer-summary");
  TrainData data = tiny_data();
  auto run = tiny_run(dir.path(), tiny_config(dir.path()), data);
  Evaluator evaluator(*run);
  TrainerCheckpoints checkpoints(*run);
  run->state.step = 3;
  run->state.best_step = 3;
  const json test = test_with_best_weights(*run, evaluator, checkpoints);
  ASSERT_TRUE(test.is_object());
  EXPECT_EQ(test["phase"], "test");
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "test_report.md"));
  const json summary = summary_record(*run, test, 2.0);
  EXPECT_EQ(summary["status"], "completed");
  EXPECT_EQ(summary["steps"], 3);
  EXPECT_EQ(summary["best"]["step"], 3);
  EXPECT_EQ(summary["test_macro_f1"], test["macro_f1"]);
  EXPECT_TRUE(summary["final_val"].is_null());
  EXPECT_FALSE(summary.contains("tokens"));
  EXPECT_FALSE(summary.contains("dist"));

  data.test = nullptr;
  auto untested = tiny_run(dir.path() / "untested", tiny_config(dir.path() / "untested"), data);
  Evaluator evaluator2(*untested);
  TrainerCheckpoints checkpoints2(*untested);
  EXPECT_TRUE(test_with_best_weights(*untested, evaluator2, checkpoints2).is_null());
}

// ---- the loop ----

TEST(TrainerLoop, LogStepsPatienceResumeSkipAndRates) {
  EXPECT_TRUE(log_step_due(10, 5, 18));
  EXPECT_FALSE(log_step_due(11, 5, 18));
  EXPECT_TRUE(log_step_due(18, 5, 18));  // the last step always
  EXPECT_FALSE(patience_exhausted(0, 100));
  EXPECT_FALSE(patience_exhausted(3, 2));
  EXPECT_TRUE(patience_exhausted(3, 3));
  EXPECT_EQ(micro_batches_to_skip(24, 8, 2), 6);
  TrainInterval epoch;
  epoch.images = 50;
  epoch.tokens = 1000;
  EXPECT_EQ(epoch_rate_text(epoch, 2.0, false, 1), "25.0 img/s");
  EXPECT_EQ(epoch_rate_text(epoch, 2.0, true, 2), "25.0 samples/s, 500 tokens/s (this rank)");
  EXPECT_TRUE(std::isnan(TrainInterval{}.mean_loss()));
}

TEST(TrainerLoop, StopsAtMaxStepsWithAccumulation) {
  testing::ScratchDir dir("trainer-loop");
  Config config = tiny_config(dir.path());
  config.train.accumulation_steps = 2;  // 24 samples / (4 x 2): 3 steps an epoch
  config.train.max_steps = 4;
  config.train.checkpoint_every_steps = 0;
  auto run = tiny_run(dir.path(), config);
  Evaluator evaluator(*run);
  TrainerCheckpoints checkpoints(*run);
  TrainLoop(*run, evaluator, checkpoints).run();
  EXPECT_EQ(run->steps_per_epoch, 3);
  EXPECT_EQ(run->state.step, 4);
  EXPECT_EQ(run->state.epoch, 1);
  EXPECT_EQ(run->state.images_trained, 32);
  EXPECT_EQ(run->micro_batches_run, 8);
  EXPECT_EQ(run->stop_reason, "max_steps");
  EXPECT_EQ(run->state.history.size(), 1u);  // the epoch's validation
}

TEST(TrainerLoop, EarlyStoppingEndsTheRun) {
  testing::ScratchDir dir("trainer-early");
  Config config = tiny_config(dir.path());
  config.train.epochs = 5;  // 30 steps, each evaluated: one of them fails to improve on the best
  config.train.eval_every_steps = 1;
  config.train.patience = 1;
  config.train.early_stopping_metric = ValidationMetric::kAccuracy;
  auto run = tiny_run(dir.path(), config);
  Evaluator evaluator(*run);
  TrainerCheckpoints checkpoints(*run);
  TrainLoop(*run, evaluator, checkpoints).run();
  EXPECT_EQ(run->stop_reason, "early_stopped");
  EXPECT_LT(run->state.step, 30);
  EXPECT_EQ(run->state.evals_without_improvement, 1);
  EXPECT_EQ(run->state.history.size(), static_cast<std::size_t>(run->state.step));
}

// ---- host reads of the loop: the loss stays on the device between log steps ----

Config quiet_config(const std::filesystem::path& dir) {
  Config config = tiny_config(dir);
  config.train.epochs = 2;           // 12 steps of 4 images
  config.train.log_every_steps = 5;  // log at 5, 10 and 12 (the last)
  config.train.checkpoint_every_steps = 0;
  return config;
}

TEST(TrainLoopHostReads, OneOutcomeReadPerQuietStepAndTheLossAtLogSteps) {
  testing::ScratchDir dir("loop-reads");
  auto run = tiny_run(dir.path(), quiet_config(dir.path()));
  Evaluator evaluator(*run);
  TrainerCheckpoints checkpoints(*run);
  TrainLoop(*run, evaluator, checkpoints).run();
  EXPECT_EQ(run->state.step, 12);
  EXPECT_EQ(run->quiet_steps, 9);       // all but the log steps 5, 10 and 12
  EXPECT_EQ(run->quiet_step_reads, 9);  // the reference optimizer: the outcome, one small copy each
  const auto& reads = run->step_runner->host_reads();
  EXPECT_EQ(reads.count(HostRead::kLoss), 0);
  EXPECT_EQ(reads.count(HostRead::kTally), 4);  // log steps 5, 10 and 12, and the end of epoch 1 (step 6)
  EXPECT_TRUE(std::isfinite(run->state.last_finite_loss));
  EXPECT_EQ(run->state.last_finite_step, 12);
  const json summary = summary_record(*run, json(nullptr), 1.0);
  EXPECT_EQ(summary["host_reads"]["reads_in_quiet_steps"], 9);
  EXPECT_EQ(summary["cuda_graph"]["captured"], false);
  EXPECT_THAT(summary["cuda_graph"]["reason"].get<std::string>(), HasSubstr("not on CUDA"));
}

TEST(TrainLoopHostReads, ADeviceSkippingOptimizerLeavesQuietStepsWithoutReads) {
  testing::ScratchDir dir("loop-no-reads");
  auto run = tiny_run(dir.path(), quiet_config(dir.path()));
  run->step_runner->set_device_skip(sgd_skipping_on_device(*run->model, 0.01));
  Evaluator evaluator(*run);
  TrainerCheckpoints checkpoints(*run);
  TrainLoop(*run, evaluator, checkpoints).run();
  EXPECT_EQ(run->quiet_steps, 9);
  EXPECT_EQ(run->quiet_step_reads, 0);
  EXPECT_EQ(run->step_runner->host_reads().total(), run->step_runner->host_reads().count(HostRead::kTally));
  EXPECT_TRUE(std::isfinite(run->state.last_finite_loss));
  EXPECT_EQ(run->state.last_finite_step, 12);
  EXPECT_EQ(run->state.bad_steps, 0);
}

TEST(TrainLoopHostReads, ADeviceSkippingOptimizerStillStopsADivergedRunAtItsNextRead) {
  testing::ScratchDir dir("loop-diverge");
  Config config = quiet_config(dir.path());
  config.train.max_bad_steps = 2;
  auto run = tiny_run(dir.path(), config);
  run->step_runner->set_device_skip(sgd_skipping_on_device(*run->model, 1e30));
  Evaluator evaluator(*run);
  TrainerCheckpoints checkpoints(*run);
  EXPECT_THAT([&] { TrainLoop(*run, evaluator, checkpoints).run(); }, ThrowsMessage<Error>(HasSubstr("diverged")));
  // Found at a read of the tally: a log step (5, 10) or the end of an epoch (6, 12).
  EXPECT_THAT(run->state.step, ::testing::AnyOf(5, 6, 10, 12));
  EXPECT_GE(run->state.bad_steps, 2);
  EXPECT_GE(run->step_runner->scaler().skipped_steps(), 2);
}

TEST(TrainLoopHostReads, TheDeviceTallyCountsRunsOfNonFiniteSteps) {
  auto tally = empty_device_tally(torch::kCPU, 1);  // a resumed run one bad step in
  auto step = [&](double loss, std::int64_t n) {
    StepResult r;
    r.loss_value = torch::tensor(loss, torch::kDouble);
    r.found_inf = torch::tensor(!std::isfinite(loss));
    tally = add_to_device_tally(tally, r, n);
  };
  step(std::nan(""), 1);
  step(INFINITY, 2);
  step(0.5, 3);
  step(std::nan(""), 4);
  step(0.25, 5);
  const auto v = tally.contiguous();
  EXPECT_DOUBLE_EQ(v[kLossSum].item<double>(), 0.75);
  EXPECT_DOUBLE_EQ(v[kApplied].item<double>(), 2);
  EXPECT_DOUBLE_EQ(v[kSkipped].item<double>(), 3);
  EXPECT_DOUBLE_EQ(v[kBadRun].item<double>(), 0);
  EXPECT_DOUBLE_EQ(v[kWorstRun].item<double>(), 3);  // the resumed one and steps 1, 2
  EXPECT_DOUBLE_EQ(v[kLastLoss].item<double>(), 0.25);
  EXPECT_DOUBLE_EQ(v[kLastStep].item<double>(), 5);
  EXPECT_DOUBLE_EQ(v[kGradNorm].item<double>(), -1);
}

}  // namespace
}  // namespace shoplens
