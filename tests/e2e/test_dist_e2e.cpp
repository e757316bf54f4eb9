// End-to-end data parallelism on CPU: the real `shoplens launch` and `shoplens train` processes,
// Gloo over 127.0.0.1, 2 ranks, on a tiny catalog the test makes (docs/DISTRIBUTED.md).
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include <fstream>
#include <regex>

#include <nlohmann/json.hpp>

#include <torch/torch.h>

#include "shoplens/models/classifier.h"
#include "shoplens/train/checkpoint.h"
#include "shoplens/train/train_state.h"
#include "model_test_util.h"
#include "scratch_suite.h"
#include "test_util.h"

namespace shoplens {
namespace {

namespace fs = std::filesystem;
using testing::run_shell;
using testing::run_shoplens;

using testing::expect_close;
using testing::read_json;

class E2eDist : public testing::ScratchSuite<E2eDist> {
 protected:
  static void SetUpTestSuite() { data_ = testing::shared_image_data({200, "40:56", 8, 24, 64}); }
  static fs::path shards() { return data_ / "shards"; }
  static std::string bin() { return testing::shoplens_bin(); }
  static std::string launch(int nproc, const std::string& extra = "") { return testing::launch_args(nproc, extra); }
  // A small CNN run with the ledger on; `extra` adds flags.
  static std::string train(const fs::path& run, const std::string& extra) {
    auto has = [&](const char* flag) { return extra.find(flag) != std::string::npos; };
    return "train --shards " + shards().string() + " --out " + run.string() +
           (has("--model") ? "" : " --model small_cnn") + (has("--epochs") ? "" : " --epochs 2") +
           (has("--lr") ? "" : " --lr 0.003") +
           " --threads 1 --set loader.workers=1 --set dist.ledger=true --set dist.timeout_seconds=60 " +
           (has("augment.image_size") ? "" : "--set augment.image_size=16 ") + extra;
  }
  static fs::path data_;
};
fs::path E2eDist::data_;

// A socket bound to a free loopback port (the port in `port`), or -1.
int bind_loopback(int& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sa;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0)
    return -1;
  port = ntohs(sa.sin_port);
  return fd;
}

std::string ledger_check(const fs::path& run) {
  auto r = run_shoplens("verify-ledger " + run.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return r.output;
}

// 2 ranks x micro-batch b equal 1 rank x 2b, and with accumulation, on a model without batch
// statistics (ViT-Tiny: LayerNorm only), so data parallelism must reproduce one big batch. SGD
// with momentum: Adam's first steps divide by sqrt(v) of near-zero gradients and would turn
// last-bit differences of the summation order into whole lr-sized ones.
TEST_F(E2eDist, TwoRanksMatchOneRankWithTwiceTheBatch) {
  const std::string common =
      " --model vit_tiny --epochs 1 --max-steps 4 "
      "--set train.deterministic=true --set train.checkpoint_every_steps=4 --set optim.name=sgd --set "
      "optim.momentum=0.9 "
      "--lr 0.05";
  const fs::path single = scratch() / "eq-single", ranks = scratch() / "eq-ranks",
                 ranks_acc = scratch() / "eq-ranks-acc", single_acc = scratch() / "eq-single-acc";
  auto a = run_shoplens(train(single, "--batch-size 8" + common));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  auto b = run_shoplens(launch(2) + train(ranks, "--batch-size 4" + common));
  ASSERT_EQ(b.exit_code, 0) << b.output;
  auto c = run_shoplens(launch(2) + train(ranks_acc, "--batch-size 2 --accumulation 2" + common));
  ASSERT_EQ(c.exit_code, 0) << c.output;
  auto d = run_shoplens(train(single_acc, "--batch-size 4 --accumulation 2" + common));
  ASSERT_EQ(d.exit_code, 0) << d.output;

  const auto reference = testing::final_parameters(single, 12);
  expect_close(testing::final_parameters(ranks, 12), reference, "2 ranks x 4 vs 1 x 8");
  expect_close(testing::final_parameters(ranks_acc, 12), reference, "2 ranks x 2 x 2 accumulation vs 1 x 8");
  expect_close(testing::final_parameters(single_acc, 12), reference, "1 rank x 4 x 2 accumulation vs 1 x 8");
  // The comparison can fail: half the batch (other samples, other gradients) ends elsewhere.
  const fs::path half = scratch() / "eq-half";
  auto e = run_shoplens(train(half, "--batch-size 4" + common));
  ASSERT_EQ(e.exit_code, 0) << e.output;
  const auto other = testing::final_parameters(half, 12);
  EXPECT_GT((other - reference).abs().max().item<double>(), 1e-3 * reference.abs().max().item<double>());

  // The test split is scored in two strided halves and summed: the same metrics as one process.
  const auto single_test = read_json(single / "summary.json")["test"];
  const auto ranks_test = read_json(ranks / "summary.json")["test"];
  ASSERT_TRUE(single_test.is_object() && ranks_test.is_object());
  EXPECT_EQ(single_test["confusion"], ranks_test["confusion"]);
  EXPECT_NEAR(single_test["loss"].get<double>(), ranks_test["loss"].get<double>(), 1e-4);

  const auto summary = read_json(ranks / "summary.json");
  EXPECT_EQ(summary["world_size"], 2);
  EXPECT_EQ(summary["global_batch"], 8);
  EXPECT_EQ(summary["images_trained"], 32);  // over both ranks
  EXPECT_EQ(summary["dist"]["backend"], "gloo");
  EXPECT_TRUE(fs::exists(ranks / "logs" / "rank-1.log"));
  EXPECT_TRUE(fs::exists(ranks / "train.log"));
}

// kill -9 of one worker mid-epoch: the launcher stops the group, restarts it, the workers resume
// from the latest checkpoint, the run completes, and every sample was used exactly once per epoch.
TEST_F(E2eDist, KilledWorkerIsRestartedAndTheLedgerIsExact) {
  const fs::path run = scratch() / "fault";
  // The fault is injected through the environment, read by the workers on their first attempt.
  auto faulty =
      run_shell("SHOPLENS_FAULT_KILL_STEP=6 SHOPLENS_FAULT_KILL_RANK=1 " + bin() + " " + launch(2, "--max-restarts 2") +
                train(run, "--batch-size 4 --set train.checkpoint_every_steps=4"));
  ASSERT_EQ(faulty.exit_code, 0) << faulty.output;
  EXPECT_NE(faulty.output.find("killed by signal 9"), std::string::npos) << faulty.output;
  EXPECT_NE(faulty.output.find("restart 1 of 2"), std::string::npos) << faulty.output;
  EXPECT_NE(faulty.output.find("resumed from"), std::string::npos) << faulty.output;
  const auto summary = read_json(run / "summary.json");
  EXPECT_EQ(summary["status"], "completed");
  const std::string report = ledger_check(run);
  EXPECT_NE(report.find("superseded by a restart"), std::string::npos);
  EXPECT_NE(report.find("result: exact"), std::string::npos) << report;
  EXPECT_EQ(report.find(" 0 superseded"), std::string::npos) << "step 5-6 were redone after the restart: " << report;
}

// A worker killed after a checkpoint step's collectives, before its ledger line: rank 0 must not
// record the step as done (checkpoint it) without that line, or the resumed run would never
// account for the worker's samples of the step.
TEST_F(E2eDist, AWorkerKilledBeforeItsLedgerLineAtACheckpointStepLeavesTheLedgerExact) {
  const fs::path run = scratch() / "fault-at-checkpoint";
  auto faulty =
      run_shell("SHOPLENS_FAULT_KILL_STEP=8 SHOPLENS_FAULT_KILL_RANK=1 " + bin() + " " + launch(2, "--max-restarts 1") +
                train(run, "--batch-size 4 --epochs 1 --set train.checkpoint_every_steps=4"));
  ASSERT_EQ(faulty.exit_code, 0) << faulty.output;
  EXPECT_NE(faulty.output.find("restart 1 of 1"), std::string::npos) << faulty.output;
  const std::string report = ledger_check(run);
  EXPECT_NE(report.find("result: exact"), std::string::npos) << report;
  EXPECT_EQ(report.find(" 0 superseded"), std::string::npos) << "steps 5-8 were redone after the restart: " << report;
}

// A checkpoint written by 2 ranks resumes on 1 (accumulation makes up the global batch), and
// one written by 1 rank resumes on 2; the ledger stays exact across both changes.
TEST_F(E2eDist, ElasticResumeAcrossWorldSizesKeepsTheLedgerExact) {
  const fs::path run = scratch() / "elastic";
  auto first = run_shoplens(launch(2) + train(run, "--batch-size 4 --epochs 3 --max-steps 5"));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  auto second = run_shoplens("train --out " + run.string() + " --resume auto --max-steps 17");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("accumulation 1 -> 2"), std::string::npos) << second.output;
  auto third = run_shoplens(launch(2) + "train --out " + run.string() + " --resume auto --max-steps 0");
  ASSERT_EQ(third.exit_code, 0) << third.output;
  const auto summary = read_json(run / "summary.json");
  EXPECT_EQ(summary["status"], "completed");
  EXPECT_EQ(summary["world_size"], 2);
  const std::string report = ledger_check(run);
  EXPECT_NE(report.find("3 segments"), std::string::npos) << report;
  for (const char* e : {"epoch 0:", "epoch 1:", "epoch 2:"}) EXPECT_NE(report.find(e), std::string::npos) << report;
}

// SIGTERM to the launcher is forwarded once: the workers finish their step, rank 0 checkpoints,
// everyone exits, the launcher reports 130; launching again resumes and completes exactly.
TEST_F(E2eDist, SigtermToTheLauncherCheckpointsAndResumeCompletes) {
  const fs::path run = scratch() / "preempted";
  const std::string cmd = bin() + " " + launch(2) + train(run, "--batch-size 4 --epochs 4");
  // Preempted once training is under way (rank 0's ledger has steps).
  ASSERT_EQ(testing::interrupt_when(
                cmd, [&] { return testing::ledger_steps(run) >= 6; }, 180),
            130);
  ASSERT_FALSE(fs::exists(run / "summary.json")) << "the run finished before the signal: make it longer";
  auto resumed = run_shoplens(launch(2) + "train --out " + run.string() + " --resume auto");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(read_json(run / "summary.json")["status"], "completed");
  const std::string report = ledger_check(run);
  EXPECT_NE(report.find("result: exact"), std::string::npos) << report;
}

// A finished run's ledger with one step's line deleted (once "8 of 9 steps (partial) ... result:
// exact", exit 0), or its last step's: not exact, exit 1, the missing step named. A number out of
// range (a 23-digit epoch, once "9 of 0 steps ... exact") is damage named by file:line.
TEST_F(E2eDist, VerifyLedgerNamesAMissingStepAndRefusesNumbersOutOfRange) {
  const fs::path run = scratch() / "gaps";
  auto trained = run_shoplens(train(run, "--batch-size 16 --epochs 1"));
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  fs::path ledger;  // the one segment's file: seg-0-<ms>.rank-0.jsonl
  for (const auto& e : fs::directory_iterator(run / "ledger")) ledger = e.path();
  const std::string original = testing::read_text(ledger);
  ASSERT_NE(original.find("\"step\":5,"), std::string::npos) << original;
  ASSERT_NE(ledger_check(run).find("result: exact"), std::string::npos);
  const auto without_line = [&](const std::string& needle) {
    const std::size_t at = original.find(needle);
    const std::size_t begin = original.rfind('\n', at) + 1;
    return original.substr(0, begin) + original.substr(original.find('\n', at) + 1);
  };

  testing::write_text(ledger, without_line("\"step\":5,"));
  auto gap = run_shoplens("verify-ledger " + run.string());
  EXPECT_EQ(gap.exit_code, 1) << gap.output;
  EXPECT_NE(gap.output.find("steps never recorded: 5 "), std::string::npos) << gap.output;
  EXPECT_NE(gap.output.find("result: NOT exact"), std::string::npos) << gap.output;

  const std::int64_t last = read_json(run / "summary.json")["steps"].get<std::int64_t>();
  testing::write_text(ledger, without_line("\"step\":" + std::to_string(last) + ","));
  auto tail = run_shoplens("verify-ledger " + run.string() + " --format json");
  EXPECT_EQ(tail.exit_code, 1) << tail.output;
  EXPECT_EQ(nlohmann::json::parse(tail.output)["missing_steps"], nlohmann::json::array({{last, last}})) << tail.output;
  auto old_spelling = run_shoplens("verify-ledger " + run.string() + " --json");  // warns, and still prints JSON
  EXPECT_EQ(old_spelling.exit_code, 1) << old_spelling.output;
  EXPECT_NE(old_spelling.output.find("--json is deprecated: use --format json"), std::string::npos)
      << old_spelling.output;
  EXPECT_NE(old_spelling.output.find("\"missing_steps\""), std::string::npos) << old_spelling.output;

  std::string huge = original;
  huge.replace(huge.find("\"epoch\":0"), 9, "\"epoch\":12345678901234567890123");
  testing::write_text(ledger, huge);
  auto garbled = run_shoplens("verify-ledger " + run.string());
  EXPECT_EQ(garbled.exit_code, 1) << garbled.output;
  EXPECT_NE(garbled.output.find(ledger.filename().string() + ":2: epoch: expected a whole number"), std::string::npos)
      << garbled.output;
  EXPECT_EQ(garbled.output.find("result: exact"), std::string::npos) << garbled.output;
}

TEST_F(E2eDist, TorchrunCanLaunchTheWorkers) {
  if (!fs::exists("/usr/bin/torchrun")) GTEST_SKIP() << "torchrun (python3-torch) is not installed";
  const fs::path run = scratch() / "torchrun";
  // Debian's torchrun 1.13 on Python 3.11 cannot parse its own default --redirects 0 (an IntFlag
  // change), so the test passes explicit redirects; our side reads the same environment either way.
  auto r = run_shell("/usr/bin/torchrun --standalone --nproc_per_node 2 --redirects 1 --tee 1 --log_dir " +
                     (scratch() / "torchrun-logs").string() + " --no_python " + bin() + " " +
                     train(run, "--batch-size 4 --epochs 1 --max-steps 4"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto summary = read_json(run / "summary.json");
  EXPECT_EQ(summary["world_size"], 2);
  EXPECT_EQ(summary["steps"], 4);
}

// `-b auto` on two ranks whose devices allow different batches (here two budgets: a card with less
// free memory): each rank searches its own, and both train the smaller plan. The job used to stop
// ("the ranks' batch searches found different micro-batches ... set loader.batch_size explicitly").
TEST_F(E2eDist, AutoBatchRanksWithDifferentBudgetsTrainTheSmallerPlan) {
  int port = 0;
  const int fd = bind_loopback(port);
  ASSERT_GE(fd, 0);
  ::close(fd);  // free again for rank 0's store
  const fs::path run = scratch() / "auto-ranks";
  auto rank = [&](int r, const char* budget) {
    return "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " RANK=" + std::to_string(r) +
           " LOCAL_RANK=" + std::to_string(r) + " WORLD_SIZE=2 " + bin() + " " +
           train(run,
                 std::string("--epochs 1 -b auto --memory-budget ") + budget +
                     " --set augment.image_size=64 --set find_batch.objective=memory --set find_batch.cache=false");
  };
  auto r = run_shell("(" + rank(1, "24MiB") + " > " + (scratch() / "auto-rank-1.txt").string() + " 2>&1 & " +
                     rank(0, "40MiB") + "; rc=$?; wait $! || rc=1; exit $rc)");
  const std::string rank1 = testing::read_text(scratch() / "auto-rank-1.txt");
  ASSERT_EQ(r.exit_code, 0) << r.output << "\n--- rank 1:\n" << rank1;
  const auto found = read_json(run / "find_batch.json");
  const auto& planned = found["rank_agreement"]["planned_micro_batches"];
  ASSERT_EQ(planned.size(), 2u) << found.dump();
  EXPECT_LT(planned[1].get<int>(), planned[0].get<int>()) << "the smaller budget should allow the smaller batch";
  EXPECT_EQ(found["rank_agreement"]["chosen_rank"], 1);
  const auto summary = read_json(run / "summary.json");
  EXPECT_EQ(summary["status"], "completed");
  EXPECT_EQ(summary["micro_batch"], planned[1]);
  EXPECT_EQ(summary["global_batch"], 2 * planned[1].get<int>());
  EXPECT_NE(r.output.find("every rank trains rank 1's plan"), std::string::npos) << r.output;
}

TEST_F(E2eDist, StartupFaultsFailFastWithAClearMessage) {
  // A port already taken: the launcher says so before starting anything.
  int port = 0;
  const int fd = bind_loopback(port);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  auto busy = run_shoplens("launch --nproc-per-node 2 --master-port " + std::to_string(port) + " -- " + bin() + " " +
                           train(scratch() / "busy", "--batch-size 4"));
  ::close(fd);
  EXPECT_EQ(busy.exit_code, 2) << busy.output;
  EXPECT_NE(busy.output.find("port " + std::to_string(port)), std::string::npos) << busy.output;

  // Ranks started with different world sizes: both refuse at once, naming the variable. Their
  // timeout is an hour, beyond the test's own limit: only a refusal that does not wait for it
  // lets the test finish (no clock is read).
  const std::string env = "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " ";
  const std::string patient = train(scratch() / "mismatch", "--batch-size 4") + " --set dist.timeout_seconds=3600";
  auto mismatch = run_shell("(" + env + "RANK=1 WORLD_SIZE=3 " + bin() + " " + patient + " > " +
                            (scratch() / "mismatch-1.txt").string() + " 2>&1 & " + env + "RANK=0 WORLD_SIZE=2 " +
                            bin() + " " + patient + "; rc=$?; wait; exit $rc)");
  EXPECT_NE(mismatch.exit_code, 0) << mismatch.output;
  EXPECT_NE(mismatch.output.find("WORLD_SIZE"), std::string::npos) << mismatch.output;
  EXPECT_NE(testing::read_text(scratch() / "mismatch-1.txt").find("WORLD_SIZE"), std::string::npos);

  // A rank that never comes: the other reports who is missing when the timeout runs out.
  auto lonely = run_shell(env + "RANK=0 WORLD_SIZE=2 " + bin() + " " + train(scratch() / "alone", "--batch-size 4") +
                          " --set dist.timeout_seconds=3");
  EXPECT_EQ(lonely.exit_code, 1) << lonely.output;
  EXPECT_NE(lonely.output.find("rank(s) 1 of 2 never joined"), std::string::npos) << lonely.output;

  // A worker's config error is not worth a restart: the launcher ends with 2 at once.
  auto bad = run_shoplens(launch(2, "--max-restarts 3") + train(scratch() / "bad", "--batch-size 0"));
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_EQ(bad.output.find("restart 1"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace shoplens

namespace shoplens {
namespace {

// The launcher alone, with shell workers: the environment it gives, restarts, exit codes.
TEST(E2eLaunch, GivesTorchrunsEnvironmentRestartsFailuresAndReportsTheOutcome) {
  auto env = testing::run_shoplens(
      "launch --nproc-per-node 2 --master-port 0 -- sh -c 'echo \"R=$RANK L=$LOCAL_RANK W=$WORLD_SIZE "
      "LW=$LOCAL_WORLD_SIZE A=$MASTER_ADDR C=$TORCHELASTIC_RESTART_COUNT T=$OMP_NUM_THREADS\"'");
  ASSERT_EQ(env.exit_code, 0) << env.output;
  EXPECT_NE(env.output.find("[rank 0] R=0 L=0 W=2 LW=2 A=127.0.0.1 C=0 T="), std::string::npos) << env.output;
  EXPECT_NE(env.output.find("[rank 1] R=1 L=1 W=2 LW=2 A=127.0.0.1 C=0 T="), std::string::npos) << env.output;

  // Rank 1 fails on the first attempt only: one restart, then success.
  auto once = testing::run_shoplens(
      "launch --nproc-per-node 2 --master-port 0 --max-restarts 1 --grace-seconds 5 -- sh -c "
      "'if [ $RANK = 1 ] && [ $TORCHELASTIC_RESTART_COUNT = 0 ]; then exit 5; fi; sleep 0.2'");
  EXPECT_EQ(once.exit_code, 0) << once.output;
  EXPECT_NE(once.output.find("rank 1 (pid"), std::string::npos) << once.output;
  EXPECT_NE(once.output.find("exited with code 5"), std::string::npos) << once.output;
  EXPECT_NE(once.output.find("restart 1 of 1"), std::string::npos) << once.output;

  // Always failing: the restarts run out and the launcher fails (1).
  auto always = testing::run_shoplens(
      "launch --nproc-per-node 2 --master-port 0 --max-restarts 2 --grace-seconds 5 -- sh -c "
      "'[ $RANK = 0 ] && exit 3; sleep 30'");
  EXPECT_EQ(always.exit_code, 1) << always.output;
  EXPECT_NE(always.output.find("2 restarts used of 2: giving up"), std::string::npos) << always.output;

  // A command that fails at once waits longer before each restart (once 741 restarts in 30 s).
  auto backoff = testing::run_shoplens(
      "launch --nproc-per-node 1 --master-port 0 --max-restarts 3 --restart-delay 0.01 -- sh -c 'exit 3'");
  EXPECT_EQ(backoff.exit_code, 1) << backoff.output;
  for (const char* wait : {"in 0.01 s (restart 1 of 3)", "in 0.02 s (restart 2 of 3)", "in 0.04 s (restart 3 of 3)"})
    EXPECT_NE(backoff.output.find(wait), std::string::npos) << wait << "\n" << backoff.output;
  auto help = testing::run_shoplens("launch --help");
  EXPECT_NE(help.output.find("--restart-delay"), std::string::npos) << help.output;
  // The default beside the flag, as CLI11 shows defaults ("=1" or "[1]", by its version).
  EXPECT_TRUE(std::regex_search(help.output, std::regex("--restart-delay[^\n]*(=1\\b|\\[1\\])")))
      << "the default delay is shown: " << help.output;
  auto negative = testing::run_shoplens("launch --restart-delay -1 -- true");
  EXPECT_EQ(negative.exit_code, 2) << negative.output;

  auto none = testing::run_shoplens("launch --nproc-per-node 2");
  EXPECT_EQ(none.exit_code, 2) << none.output;
  EXPECT_NE(none.output.find("no worker command"), std::string::npos) << none.output;
  auto missing = testing::run_shoplens("launch --nproc-per-node 1 --master-port 0 -- /no/such/program");
  EXPECT_EQ(missing.exit_code, 1) << missing.output;
  EXPECT_NE(missing.output.find("cannot run '/no/such/program'"), std::string::npos) << missing.output;
}

// SIGTERM while the launcher waits before a restart ends it at once with 130, not after the wait.
TEST(E2eLaunch, ASignalDuringTheRestartDelayEndsTheLauncher) {
  testing::ScratchDir dir("launch-delay");
  const fs::path started = dir.path() / "started";
  const std::string cmd = testing::shoplens_bin() +
                          " launch --nproc-per-node 1 --master-port 0 --max-restarts 5 --restart-delay 600 -- sh -c "
                          "'touch " +
                          started.string() + "; exit 3'";
  EXPECT_EQ(testing::interrupt_when(
                cmd, [&] { return fs::exists(started); }, 60),
            130);
}

}  // namespace
}  // namespace shoplens
