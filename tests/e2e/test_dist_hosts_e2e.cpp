// Two nodes over a real link: scripts/netns/two_hosts.sh makes two network namespaces (node0
// 10.77.0.1, node1 10.77.0.2, each with its own hostname) joined by a veth pair, and the job runs
// one rank per node, launched by `shoplens launch`, by torchrun, or by a real Slurm
// (scripts/slurm/local_cluster.sh, scripts/slurm/train.sbatch). Skipped where network namespaces
// (root) or the launcher are not available. docs/DISTRIBUTED.md.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <thread>

#include <torch/torch.h>

#include "shoplens/models/classifier.h"
#include "shoplens/train/checkpoint.h"
#include "shoplens/train/train_state.h"
#include "model_test_util.h"
#include "score_shard_fixture.h"
#include "test_util.h"

namespace shoplens {
namespace {

namespace fs = std::filesystem;
using testing::read_json;
using testing::read_text;
using testing::run_shell;
using testing::run_shoplens;

std::string script(const std::string& name) { return testing::source_dir() + "/scripts/" + name; }

// A command running in the background with its output in `log`; killed if the test ends early.
class Background {
 public:
  Background(const std::string& command, const fs::path& log) : log_(log) {
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      ::execl("/bin/sh", "sh", "-c", ("exec " + command + " >>" + log.string() + " 2>&1").c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;
  ~Background() {
    if (pid_ <= 0) return;
    ::kill(-pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  // The exit code, or 128 + the signal that ended it.
  int wait() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  std::string output() const { return read_text(log_); }

 private:
  pid_t pid_ = -1;
  fs::path log_;
};

// Polls `done` until it holds; the limit only keeps a broken run from hanging the test.
bool eventually(const std::function<bool()>& done) {
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(240);
  while (!done()) {
    if (std::chrono::steady_clock::now() > limit) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

std::string exact_ledger(const fs::path& run) {
  auto r = run_shoplens("verify-ledger " + run.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("result: exact"), std::string::npos) << r.output;
  return r.output;
}

// The equivalence run of E2eDist.TwoRanksMatchOneRankWithTwiceTheBatch: ViT-Tiny (no batch
// statistics), 4 SGD-momentum steps.
const char* const kEquivalence =
    " --model vit_tiny --epochs 1 --max-steps 4 --set train.deterministic=true "
    "--set train.checkpoint_every_steps=4 --set optim.name=sgd --set optim.momentum=0.9 --lr 0.05";

// A run killed by ctest's timeout never tears down: remove the hosts (and a Slurm cluster's
// munged) of runs whose process is gone; their ID is "t" + the test's pid.
void remove_stale_hosts() {
  std::istringstream listed(run_shell("ip netns list 2>/dev/null").output);
  std::set<std::string> stale;
  for (std::string name; listed >> name;) {
    if (name.rfind("shoplens-t", 0) != 0) continue;
    const std::string pid = name.substr(10, name.find('-', 10) - 10);
    if (!pid.empty() && pid.find_first_not_of("0123456789") == std::string::npos && !fs::exists("/proc/" + pid))
      stale.insert("t" + pid);
  }
  for (const auto& id : stale)
    run_shell("bash " + script("slurm/local_cluster.sh") + " stop " + id + " /tmp/shoplens-slurm-" + id);
}

class TwoHosts : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    remove_stale_hosts();
    dir_ = new testing::ScratchDir("e2e-hosts");
    id_ = "t" + std::to_string(::getpid() % 10000000);
    auto up = run_shell("bash " + script("netns/two_hosts.sh") + " up " + id_);
    if (up.exit_code == 77) {
      skip_ = "no network namespaces here: " + up.output;
      return;
    }
    ASSERT_EQ(up.exit_code, 0) << up.output;
    data_ = testing::shared_image_data({200, "40:56", 8, 24, 64});
  }
  static void TearDownTestSuite() {
    run_shell("bash " + script("netns/two_hosts.sh") + " down " + id_);
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
  }

  static fs::path shards() { return data_ / "shards"; }
  static std::string bin() { return testing::shoplens_bin(); }
  // `command` on node `n` (0: 10.77.0.1, 1: 10.77.0.2).
  static std::string on_node(int n, const std::string& command) {
    return "bash " + script("netns/two_hosts.sh") + " exec " + id_ + " " + std::to_string(n) + " " + command;
  }
  // A small run with the ledger on; `extra` adds options.
  static std::string train_options(const std::string& extra) {
    auto has = [&](const char* flag) { return extra.find(flag) != std::string::npos; };
    return "--shards " + shards().string() + (has("--model") ? "" : " --model small_cnn") +
           (has("--epochs") ? "" : " --epochs 2") + (has("--lr") ? "" : " --lr 0.003") +
           " --threads 1 --set loader.workers=1 --set dist.ledger=true --set augment.image_size=16" +
           (has("timeout_seconds") ? "" : " --set dist.timeout_seconds=60") + " " + extra;
  }
  // The worker's command: the same on every node, `--resume auto` so a replaced node resumes too.
  static std::string train(const fs::path& run, const std::string& extra) {
    return bin() + " train --out " + run.string() + " --resume auto " + train_options(extra);
  }
  static std::string shoplens_launch(int n, const std::string& worker, int max_restarts) {
    return on_node(
        n, bin() + " launch --nnodes 2 --node-rank " + std::to_string(n) +
               " --nproc-per-node 1 --master-addr 10.77.0.1 --master-port 29400 --grace-seconds 20 --max-restarts " +
               std::to_string(max_restarts) + " -- " + worker);
  }
  static testing::ScratchDir* dir_;
  static fs::path data_;
  static std::string id_, skip_;
};
testing::ScratchDir* TwoHosts::dir_ = nullptr;
fs::path TwoHosts::data_;
std::string TwoHosts::id_, TwoHosts::skip_;

// One rank per node, started by `shoplens launch`, by torchrun, or as a Kubeflow PyTorchJob's pod
// starts it: the operator's MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK, and LOCAL_RANK=0,
// LOCAL_WORLD_SIZE=1 from the pod spec (docs/DISTRIBUTED.md), no launcher (the test's parameter).
class OverALink : public TwoHosts, public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    TwoHosts::SetUp();
    if (GetParam() == "torchrun" && !fs::exists("/usr/bin/torchrun"))
      GTEST_SKIP() << "torchrun (python3-torch) is not installed";
  }
  // Node n's launcher with one worker running `worker`; rendezvous on node0's link address.
  std::string launch(int n, const std::string& worker, int max_restarts = 0) {
    if (GetParam() == "pytorchjob")
      return on_node(n, "env MASTER_ADDR=10.77.0.1 MASTER_PORT=29400 WORLD_SIZE=2 RANK=" + std::to_string(n) +
                            " LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 " + worker);
    if (GetParam() == "torchrun") {
      // c10d rendezvous: a replaced node joins the next round (static rendezvous cannot).
      const fs::path logs = *dir_ / ("torchrun-logs-" + std::to_string(n) + "-" + std::to_string(starts_++));
      return on_node(
          n,
          "/usr/bin/torchrun --nnodes 2 --nproc_per_node 1 --rdzv_backend c10d --rdzv_endpoint 10.77.0.1:29400 "
          "--rdzv_id shoplens-test --max_restarts " +
              std::to_string(max_restarts) + " --redirects 1 --tee 1 --log_dir " + logs.string() + " --no_python " +
              worker);
    }
    return shoplens_launch(n, worker, max_restarts);
  }
  int starts_ = 0;
};

TEST_P(OverALink, MatchOneProcessWithTheWholeBatchAndTheLedgerIsExact) {
  const fs::path single = *dir_ / "single", nodes = *dir_ / ("nodes-" + GetParam());
  auto one = run_shell(train(single, "--batch-size 8" + std::string(kEquivalence)));
  ASSERT_EQ(one.exit_code, 0) << one.output;
  Background node1(launch(1, train(nodes, "--batch-size 4" + std::string(kEquivalence))),
                   *dir_ / ("eq-node1-" + GetParam()));
  auto node0 = run_shell(launch(0, train(nodes, "--batch-size 4" + std::string(kEquivalence))));
  ASSERT_EQ(node0.exit_code, 0) << node0.output;
  ASSERT_EQ(node1.wait(), 0) << node1.output();

  testing::expect_close(testing::final_parameters(nodes, 12), testing::final_parameters(single, 12),
                        "2 nodes x 4 vs 1 process x 8");
  const auto summary = read_json(nodes / "summary.json");
  EXPECT_EQ(summary["world_size"], 2);
  EXPECT_EQ(summary["global_batch"], 8);
  // Rank 1 joined from the other host, over the link: not loopback.
  const std::string rank1 = read_text(nodes / "logs" / "rank-1.log") + node1.output();
  EXPECT_NE(rank1.find(GetParam() == "torchrun" ? "rank 1 of 2"
                                                : "joined rank 1 of 2 (local 0 of 1), master 10.77.0.1:29400"),
            std::string::npos)
      << rank1;
  exact_ledger(nodes);
}

// The launchers that restart a group (a pod's restarts are Kubernetes' business).
using ALauncher = OverALink;

// A whole node dies mid-epoch (its launcher and its worker, SIGKILL); the surviving node's
// launcher restarts its group, the same command on a fresh node joins it, the run completes
// and the ledger is exact.
TEST_P(ALauncher, AKilledNodeIsReplacedAndTheLedgerStaysExact) {
  const fs::path run = *dir_ / ("node-killed-" + GetParam());
  const std::string worker = train(run, "--batch-size 4 --epochs 3 --set train.checkpoint_every_steps=4");
  Background node0(launch(0, worker, 2), *dir_ / ("kill-node0-" + GetParam()));
  auto node1 = std::make_unique<Background>(launch(1, worker, 2), *dir_ / ("kill-node1-" + GetParam()));
  ASSERT_TRUE(eventually([&] { return testing::ledger_steps(run) >= 12; })) << node0.output();
  ASSERT_EQ(run_shell("bash " + script("netns/two_hosts.sh") + " kill " + id_ + " 1").exit_code, 0);
  EXPECT_EQ(node1->wait(), 128 + SIGKILL);
  if (GetParam() == "shoplens") {
    // The replacement must meet rank 0's next store, not the one of the attempt that failed.
    ASSERT_TRUE(eventually([&] { return node0.output().find("restarting the group") != std::string::npos; }))
        << node0.output();
  }
  node1 = std::make_unique<Background>(launch(1, worker, 2), *dir_ / ("kill-node1-again-" + GetParam()));
  ASSERT_EQ(node0.wait(), 0) << node0.output();
  ASSERT_EQ(node1->wait(), 0) << node1->output();
  EXPECT_EQ(read_json(run / "summary.json")["status"], "completed");
  const std::string report = exact_ledger(run);
  EXPECT_NE(report.find("2 segments"), std::string::npos) << report;
  EXPECT_NE(report.find("epoch 2:"), std::string::npos) << report;
}

// The prefix E2e puts them under the e2e label (tests/CMakeLists.txt).
INSTANTIATE_TEST_SUITE_P(E2eTwoNodes, OverALink, ::testing::Values("shoplens", "torchrun", "pytorchjob"),
                         [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(E2eTwoNodes, ALauncher, ::testing::Values("shoplens", "torchrun"),
                         [](const auto& info) { return info.param; });

using E2eNetworkFault = TwoHosts;

// The link goes down for longer than dist.timeout_seconds: on both nodes the collective fails
// with an error naming it, the rank and the peer on the other host; each launcher restarts its
// group, and once the link is back the run completes with an exact ledger.
TEST_F(E2eNetworkFault, ALinkDownPastTheTimeoutNamesThePeerAndTheGroupRestarts) {
  const fs::path run = *dir_ / "link-down";
  const std::string worker =
      train(run, "--batch-size 4 --epochs 2 --set train.checkpoint_every_steps=4 --set dist.timeout_seconds=10");
  Background node0(shoplens_launch(0, worker, 3), *dir_ / "link-node0");
  Background node1(shoplens_launch(1, worker, 3), *dir_ / "link-node1");
  ASSERT_TRUE(eventually([&] { return testing::ledger_steps(run) >= 8; })) << node0.output();
  const std::string link = "bash " + script("netns/two_hosts.sh") + " link " + id_;
  ASSERT_EQ(run_shell(link + " down").exit_code, 0);
  // Down until both ranks gave up on their peer: longer than the timeout, whatever it is.
  auto restarted = [](const Background& node) {
    return node.output().find("restarting the group") != std::string::npos;
  };
  const bool both_failed = eventually([&] { return restarted(node0) && restarted(node1); });
  ASSERT_EQ(run_shell(link + " up").exit_code, 0);
  ASSERT_TRUE(both_failed) << node0.output() << node1.output();
  ASSERT_EQ(node0.wait(), 0) << node0.output();
  ASSERT_EQ(node1.wait(), 0) << node1.output();

  // e.g. "all-reduce failed on rank 0 (pid 7 on ...-node0): ... Timed out ... (a peer died, was
  // killed or did not answer within dist.timeout_seconds = 10 s; waiting on rank 1 (pid 9 on ...-node1))"
  const std::string out0 = node0.output(), out1 = node1.output();
  for (const auto& [out, self, peer] : {std::tuple{out0, 0, 1}, std::tuple{out1, 1, 0}}) {
    const std::size_t at = out.find(" failed on rank " + std::to_string(self) + " (pid ");
    ASSERT_NE(at, std::string::npos) << out;
    const std::size_t begin = out.rfind('\n', at) + 1;
    const std::string line = out.substr(begin, out.find('\n', at) - begin);
    bool names_the_collective = false;
    for (const char* collective : {"all-reduce failed", "broadcast failed", "barrier failed", "exchange of '"})
      names_the_collective = names_the_collective || line.find(collective) != std::string::npos;
    EXPECT_TRUE(names_the_collective) << line;
    EXPECT_NE(line.find("dist.timeout_seconds = 10 s"), std::string::npos) << line;
    EXPECT_NE(line.find("waiting on rank " + std::to_string(peer) + " (pid "), std::string::npos) << line;
    EXPECT_NE(line.find("on shoplens-" + id_ + "-node" + std::to_string(peer) + ")"), std::string::npos) << line;
  }
  EXPECT_EQ(read_json(run / "summary.json")["status"], "completed");
  exact_ledger(run);
}

// A real Slurm: scripts/slurm/local_cluster.sh starts munged, slurmctld and a slurmd on each of
// the two hosts; the job is scripts/slurm/train.sbatch, one srun task per node.
class E2eSlurm : public TwoHosts {
 protected:
  static void SetUpTestSuite() {
    TwoHosts::SetUpTestSuite();
    if (!skip_.empty()) return;
    auto started = run_shell(cluster("start"));
    if (started.exit_code == 77)
      skip_ = "no Slurm here: " + started.output;
    else
      ASSERT_EQ(started.exit_code, 0) << started.output;
  }
  static void TearDownTestSuite() {
    run_shell(cluster("stop"));
    TwoHosts::TearDownTestSuite();
  }
  static std::string cluster(const std::string& verb) {
    return "bash " + script("slurm/local_cluster.sh") + " " + verb + " " + id_ + " " + (*dir_ / "cluster").string();
  }
  static std::string sbatch(const fs::path& run, const std::string& options) {
    return cluster("run") + " env SHOPLENS=" + bin() + " MASTER_PORT=29400 sbatch --parsable --output " +
           (*dir_ / "slurm-%j.out").string() + " " + script("slurm/train.sbatch") + " " + run.string() + " " +
           train_options(options);
  }
  static std::string field(const std::string& text, const std::string& name) {
    const auto at = text.find(" " + name + "=");
    if (at == std::string::npos) return text;
    const auto begin = at + name.size() + 2;
    return text.substr(begin, text.find_first_of(" \n", begin) - begin);
  }
  static std::string job_state(const std::string& job) {
    return field(run_shell(cluster("run") + " scontrol show job " + job).output, "JobState");
  }
  // Submits and returns the job id.
  static std::string submit(const fs::path& run, const std::string& options) {
    auto submitted = run_shell(sbatch(run, options));
    EXPECT_EQ(submitted.exit_code, 0) << submitted.output;
    return submitted.output.substr(0, submitted.output.find_first_of(";\n"));
  }
  // Waits for the job to end; returns its final state, or the job's record if it is held (a
  // launch that failed) and will never end.
  static std::string finished(const std::string& job) {
    std::string record;
    auto held = [&] { return field(record, "Reason").find("held") != std::string::npos; };
    eventually([&] {
      record = run_shell(cluster("run") + " scontrol show job " + job).output;
      const std::string state = field(record, "JobState");
      return held() || !(state == "PENDING" || state == "RUNNING" || state == "COMPLETING" || state == "CONFIGURING");
    });
    return held() ? record : field(record, "JobState");
  }
  // Slurm compares credential times in whole seconds.
  static void wait_for_the_next_second() {
    const auto second = std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now());
    std::this_thread::sleep_until(second + std::chrono::milliseconds(1020));
  }
  // What explains a job that did not complete: its output, its record (state, reason, exit code)
  // and the end of the daemons' logs, where a refused launch is told.
  static std::string post_mortem(const std::string& job) {
    std::string text = read_text(*dir_ / ("slurm-" + job + ".out"));
    text += "\n--- scontrol show job " + job + ":\n" + run_shell(cluster("run") + " scontrol show job " + job).output;
    for (const auto& entry : fs::directory_iterator(*dir_ / "cluster" / "log"))  // slurmctld and each slurmd
      text += "\n--- tail " + entry.path().string() + ":\n" + run_shell("tail -n 25 " + entry.path().string()).output;
    return text;
  }
};

TEST_F(E2eSlurm, SbatchTrainsAcrossTheNodesAndARequeuedJobResumesExactly) {
  // Equal to one process with the whole batch, as under the other launchers.
  const fs::path single = *dir_ / "single", ranks = *dir_ / "slurm-eq";
  auto one = run_shell(train(single, "--batch-size 8" + std::string(kEquivalence)));
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const std::string eq = submit(ranks, "--batch-size 4" + std::string(kEquivalence));
  ASSERT_EQ(finished(eq), "COMPLETED") << post_mortem(eq);
  testing::expect_close(testing::final_parameters(ranks, 12), testing::final_parameters(single, 12),
                        "srun 2 nodes x 4 vs 1 process x 8");
  EXPECT_EQ(read_json(ranks / "summary.json")["world_size"], 2);
  exact_ledger(ranks);

  // scontrol requeue mid-epoch: the ranks checkpoint on Slurm's SIGTERM, the job runs again with
  // SLURM_RESTART_COUNT=1 and resumes.
  const fs::path run = *dir_ / "slurm-requeued";
  const std::string job = submit(run, "--batch-size 4 --epochs 3 --set train.checkpoint_every_steps=4");
  ASSERT_TRUE(eventually([&] { return testing::ledger_steps(run) >= 12; })) << job_state(job);
  ASSERT_EQ(run_shell(cluster("run") + " scontrol requeue " + job).exit_code, 0);
  // A requeued job waits two minutes before it is eligible again; release it now, but only once
  // the second of the requeue has passed: slurmd refuses a credential made in the second it
  // revoked the old one, and the job ends FAILED ("Job credential revoked").
  ASSERT_TRUE(eventually([&] { return job_state(job) == "PENDING"; })) << job_state(job);
  wait_for_the_next_second();
  ASSERT_EQ(run_shell(cluster("run") + " scontrol update JobId=" + job + " StartTime=now").exit_code, 0);
  ASSERT_EQ(finished(job), "COMPLETED") << post_mortem(job);
  const std::string log = read_text(*dir_ / ("slurm-" + job + ".out"));
  EXPECT_NE(log.find("CANCELLED AT"), std::string::npos) << log;
  EXPECT_NE(log.find("restart 1"), std::string::npos) << log;
  EXPECT_NE(log.find("from slurm"), std::string::npos) << log;
  EXPECT_EQ(read_json(run / "summary.json")["status"], "completed");
  const std::string report = exact_ledger(run);
  EXPECT_NE(report.find("2 segments"), std::string::npos) << report;
}

// Sharded scoring as a Slurm job array (scripts/slurm/score_array.sbatch): 4 tasks over the two
// nodes, one requeued mid-shard (Slurm's SIGTERM, then the task runs again and resumes from its
// finished chunks); the merged predictions are one per input row, identical to one process's.
TEST_F(E2eSlurm, AScoreArrayWithARequeuedTaskMergesToTheOneProcessPredictions) {
  const fs::path fixture = testing::score_shard_fixture(), input = *dir_ / "score-rows.csv";
  {
    // The fixture's 43 rows, repeated: enough work that a task is still scoring when it is requeued.
    const std::string rows = read_text(fixture / "rows.csv");
    const std::string body = rows.substr(rows.find('\n') + 1);
    std::ofstream out(input);
    out << "id,path\n";
    for (int copy = 0; copy < 240; ++copy) out << body;
  }
  const std::string options = " --weights " + (fixture / "model").string() + " --input " + input.string() +
                              " --chunk-rows 128 -b 4 --workers 1 --threads 1";
  const fs::path single = *dir_ / "score-single", job_dir = *dir_ / "score-array";
  auto one = run_shoplens("score --out " + single.string() + options);
  ASSERT_EQ(one.exit_code, 0) << one.output;

  auto submitted = run_shell(cluster("run") + " env SHOPLENS=" + bin() + " sbatch --parsable --array=0-3 --output " +
                             (*dir_ / "score-%A_%a.out").string() + " " + script("slurm/score_array.sbatch") + " " +
                             job_dir.string() + options);
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
  const std::string job = submitted.output.substr(0, submitted.output.find_first_of(";\n"));
  // Task 1 is requeued once it has finished a chunk, before it finished its shard.
  const fs::path shard1 = job_dir / "shard-00001-of-00004";
  const std::string task1 = job + "_1";
  ASSERT_TRUE(eventually([&] { return fs::exists(shard1 / "chunks" / "chunk-000000.csv"); })) << job_state(task1);
  EXPECT_FALSE(fs::exists(shard1 / "report.json")) << "task 1 finished before it was requeued: more rows needed";
  ASSERT_EQ(run_shell(cluster("run") + " scontrol requeue " + task1).exit_code, 0);
  ASSERT_TRUE(eventually([&] { return job_state(task1) == "PENDING"; })) << job_state(task1);
  wait_for_the_next_second();
  ASSERT_EQ(run_shell(cluster("run") + " scontrol update JobId=" + task1 + " StartTime=now").exit_code, 0);
  for (int task = 0; task < 4; ++task) {
    const std::string id = job + "_" + std::to_string(task);
    ASSERT_EQ(finished(id), "COMPLETED") << read_text(*dir_ / ("score-" + id + ".out")) << post_mortem(job);
  }
  const std::string log = read_text(*dir_ / ("score-" + task1 + ".out"));
  EXPECT_NE(log.find("restart 1"), std::string::npos) << log;
  EXPECT_NE(log.find("reused from an earlier run"), std::string::npos) << log;

  const auto merged = run_shoplens("score-merge " + job_dir.string() + " --input " + input.string());
  ASSERT_EQ(merged.exit_code, 0) << merged.output;
  EXPECT_EQ(read_text(job_dir / "predictions.csv"), read_text(single / "predictions.csv"));
  EXPECT_EQ(read_json(job_dir / "report.json")["rows"], 43 * 240);
}

}  // namespace
}  // namespace shoplens
