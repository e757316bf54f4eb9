// End-to-end text workload: the real `shoplens make-data --task text`, `train`, `launch` and
// `verify-ledger` on a tiny corpus the test makes (docs/TEXT.md). The same trainer, launcher and
// ledger as the image models.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <torch/torch.h>

#include "shoplens/core/config.h"
#include "shoplens/models/classifier.h"
#include "shoplens/train/checkpoint.h"
#include "shoplens/train/train_state.h"
#include "model_test_util.h"
#include "scratch_suite.h"
#include "test_util.h"

namespace shoplens {
namespace {

namespace fs = std::filesystem;
using testing::read_json;
using testing::run_shell;
using testing::run_shoplens;

class E2eText : public testing::ScratchSuite<E2eText> {
 protected:
  static void SetUpTestSuite() { data_ = testing::shared_text_data({480, 64, 1024, 100, 3}); }
  static fs::path data() { return data_; }
  static std::string bin() { return testing::shoplens_bin(); }
  // text_tiny with SGD (see E2eDist: exact comparisons need it), the ledger on, ROC AUC as the
  // checkpoint metric and the positive class weighted.
  static std::string train(const fs::path& run, const std::string& extra) {
    return "train --shards " + data().string() + " --out " + run.string() +
           " --model text_tiny --epochs 2 --lr 0.05 --threads 1 --set loader.workers=1 --set dist.ledger=true "
           "--set dist.timeout_seconds=60 --set optim.name=sgd --set optim.momentum=0.9 --set train.deterministic=true "
           "--set train.early_stopping_metric=roc_auc --set train.class_balance=weighted_loss --set text.max_length=64 "
           "--set text.bucket_window=4 " +
           extra;
  }
  static std::string launch(int nproc, const std::string& extra = "") { return testing::launch_args(nproc, extra); }
  static fs::path data_;
};
fs::path E2eText::data_;

TEST_F(E2eText, TrainsEvaluatesAucAndResumesExactlyAfterAKill) {
  const fs::path whole = scratch() / "whole", split = scratch() / "split";
  auto a = run_shoplens(train(whole, "--batch-size 16"));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_NE(a.output.find("ROC AUC"), std::string::npos) << a.output;
  // A text model's rates are samples/s and tokens/s, never img/s; the epoch's loss says which it is.
  EXPECT_NE(a.output.find("train loss (epoch mean) "), std::string::npos) << a.output;
  EXPECT_NE(a.output.find(" samples/s, "), std::string::npos) << a.output;
  EXPECT_NE(a.output.find(" tokens/s"), std::string::npos) << a.output;
  EXPECT_EQ(a.output.find("img/s"), std::string::npos) << a.output;
  // The same run killed (SIGKILL) after step 7 and resumed from its step-6 checkpoint ends in the
  // same weights: model, optimizer, schedule and data position all come back.
  auto b1 = run_shell("SHOPLENS_FAULT_KILL_STEP=7 " + bin() + " " +
                      train(split, "--batch-size 16 --set train.checkpoint_every_steps=3"));
  ASSERT_NE(b1.exit_code, 0) << b1.output;
  auto b2 = run_shoplens("train --out " + split.string() + " --resume auto");
  ASSERT_EQ(b2.exit_code, 0) << b2.output;
  EXPECT_NE(b2.output.find("resumed from"), std::string::npos) << b2.output;
  testing::expect_close(testing::final_parameters(split, 2), testing::final_parameters(whole, 2),
                        "stopped at 7 + resumed vs uninterrupted");

  const auto summary = read_json(whole / "summary.json");
  EXPECT_EQ(summary["status"], "completed");
  EXPECT_EQ(summary["best"]["metric"], "roc_auc");
  ASSERT_TRUE(summary["test_roc_auc"].is_number()) << summary.dump(2);
  const double auc = summary["test_roc_auc"].get<double>();
  EXPECT_GE(auc, 0.0);
  EXPECT_LE(auc, 1.0);
  const auto& binary = summary["test"]["binary"];
  EXPECT_GT(binary["positives"].get<int>(), 0);
  EXPECT_TRUE(binary["pr_auc"].is_number());
  EXPECT_EQ(summary["classes"], nlohmann::json({"negative", "positive"}));
  // Length bucketing keeps padding low (the corpus' lengths span 16..64).
  ASSERT_TRUE(summary["tokens"].is_object()) << summary.dump(2);
  EXPECT_LT(summary["tokens"]["padding_fraction"].get<double>(), 0.25) << summary["tokens"].dump();
  // The resolved dataset shape is saved with the run: the checkpoint rebuilt its model above.
  const auto config = read_json(whole / "config.json");
  EXPECT_EQ(config["text"]["vocab_size"], 1024);
  EXPECT_EQ(config["text"]["categorical_cardinalities"].size(), 3u);
  // The validation history carries the ranking metrics.
  const std::string metrics = testing::read_text(whole / "metrics.jsonl");
  EXPECT_NE(metrics.find("\"roc_auc\""), std::string::npos);
  auto ledger = run_shoplens("verify-ledger " + whole.string());
  EXPECT_EQ(ledger.exit_code, 0) << ledger.output;
}

// Two ranks, each cutting its share by a token budget, one of them killed with SIGKILL after step
// 5 and restarted by the launcher: every example is read exactly once per epoch, and the weights
// equal one uninterrupted process with the same global batch.
TEST_F(E2eText, TwoRanksWithATokenBudgetAndAKillMatchOneRankAndKeepTheLedgerExact) {
  const fs::path single = scratch() / "one-rank", ranks = scratch() / "two-ranks";
  auto a = run_shoplens(train(single, "--batch-size 16"));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  auto b =
      run_shell("SHOPLENS_FAULT_KILL_STEP=5 SHOPLENS_FAULT_KILL_RANK=1 " + bin() + " " + launch(2, "--max-restarts 2") +
                train(ranks, "--batch-size 8 --set loader.token_budget=160 --set train.checkpoint_every_steps=3"));
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_NE(b.output.find("killed by signal 9"), std::string::npos) << b.output;
  EXPECT_NE(b.output.find("resumed from"), std::string::npos) << b.output;
  testing::expect_close(testing::final_parameters(ranks, 2), testing::final_parameters(single, 2),
                        "2 ranks x 8 (token budget, killed) vs 1 x 16");

  const auto summary = read_json(ranks / "summary.json");
  EXPECT_EQ(summary["world_size"], 2);
  // The budget cut the micro-batches: more pieces than micro-batches per step.
  EXPECT_GT(summary["micro_batches_this_process"].get<int>(), summary["steps"].get<int>());
  // Scores gathered from both ranks' strided shares give the same test metrics as one process.
  const auto one = read_json(single / "summary.json");
  EXPECT_NEAR(summary["test_roc_auc"].get<double>(), one["test_roc_auc"].get<double>(), 1e-6);
  EXPECT_EQ(summary["test"]["confusion"], one["test"]["confusion"]);

  auto ledger = run_shoplens("verify-ledger " + ranks.string());
  EXPECT_EQ(ledger.exit_code, 0) << ledger.output;
  EXPECT_NE(ledger.output.find("result: exact"), std::string::npos) << ledger.output;
  EXPECT_NE(ledger.output.find("superseded by a restart"), std::string::npos) << ledger.output;
}

// On 2 threads the text model restarts itself once with OpenMP's passive wait policy (the GEMMs
// need the cores OpenMP's spinning threads would take), with the same arguments; a user's own
// OMP_WAIT_POLICY is left alone.
TEST_F(E2eText, TwoThreadsRestartOnceWithPassiveOpenMPAndKeepTheArguments) {
  const fs::path run = scratch() / "passive";
  auto r = run_shoplens("train --shards " + data().string() + " --out " + run.string() +
                        " --model text_tiny --max-steps 3 --threads 2 --set text.max_length=64");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto first = r.output.find("restarting with OMP_WAIT_POLICY=PASSIVE");
  EXPECT_NE(first, std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("restarting with", first + 1), std::string::npos) << "once only: " << r.output;
  EXPECT_EQ(read_json(run / "summary.json")["steps"], 3);
  auto own = run_shell("OMP_WAIT_POLICY=ACTIVE " + bin() + " train --shards " + data().string() + " --out " +
                       (scratch() / "active").string() +
                       " --model text_tiny --max-steps 1 --threads 2 --set text.max_length=64");
  ASSERT_EQ(own.exit_code, 0) << own.output;
  EXPECT_EQ(own.output.find("restarting with"), std::string::npos) << own.output;
}

// `shoplens load` reads text shards like image shards: every example once per epoch, and the
// padding fraction it reports falls when length bucketing is on.
TEST_F(E2eText, LoadReportsEveryExampleOnceAndLessPaddingWithBucketing) {
  auto padding = [&](const std::string& bucketing) {
    const fs::path out = scratch() / ("load-" + bucketing);
    auto r = run_shoplens("load --shards " + data().string() + " --out " + out.string() + " --batch-size 16 --verify " +
                          "--set text.max_length=64 --set text.bucket_by_length=" + bucketing);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    const auto result = read_json(out / "load.json");
    EXPECT_EQ(result["kind"], "text");
    const auto& epoch = result["epochs"][0];
    EXPECT_LT(epoch["not_delivered"].get<int>(), 16) << "only the last partial batch";
    EXPECT_EQ(epoch["samples"].get<int>() + epoch["not_delivered"].get<int>(), result["samples_in_split"].get<int>());
    return epoch["padding_fraction"].get<double>();
  };
  const double bucketed = padding("true"), plain = padding("false");
  EXPECT_LT(bucketed, plain / 2) << bucketed << " vs " << plain;
  auto preview = run_shoplens("load --shards " + data().string() + " --out " + (scratch() / "load-preview").string() +
                              " --preview p.png");
  EXPECT_EQ(preview.exit_code, 2) << preview.output;
}

TEST_F(E2eText, AnImageModelOnTextDataIsAConfigError) {
  auto r = run_shoplens("train --shards " + data().string() + " --out " + (scratch() / "wrong").string() +
                        " --model small_cnn");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("text_tiny"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace shoplens
