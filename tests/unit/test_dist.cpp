// Data parallelism without a launcher: the environment parser on fake environments, and the real
// c10d Gloo backend between threads of this process (an in-memory store, loopback sockets).
#include <torch/torch.h>

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <unistd.h>

#include <fmt/format.h>

#include "model_test_util.h"
#include "shoplens/batch/find_batch.h"
#include "shoplens/dist/cuda_device.h"
#include "shoplens/core/errors.h"
#include "shoplens/data/loader.h"
#include "shoplens/dist/dist_env.h"
#include "shoplens/dist/gradient_reducer.h"
#include "shoplens/dist/launcher.h"
#include "shoplens/dist/ledger.h"
#include "shoplens/dist/process_group.h"
#include "shoplens/train/optimizer.h"
#include "shoplens/train/train_step.h"
#include "test_util.h"

namespace shoplens {
namespace {

DistEnv parse(const std::map<std::string, std::string>& vars) {
  return dist_env_from([&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

// Every rank of a node used cuda:0 before: LOCAL_RANK now picks the GPU, and where the scheduler
// shows each task a single GPU (Slurm's binding) every rank takes the one it sees.
TEST(CudaDevice, EachLocalRankGetsItsOwnVisibleGpu) {
  EXPECT_EQ(cuda_device_for(0, 8), 0);
  EXPECT_EQ(cuda_device_for(3, 8), 3);
  EXPECT_EQ(cuda_device_for(3, 1), 0);  // one visible device per task
  EXPECT_EQ(cuda_device_for(5, 4), 1);  // more local ranks than devices: shared round-robin
  EXPECT_EQ(cuda_device_for(2, 0), 0);  // none visible
  EXPECT_EQ(cuda_device_for(-1, 4), 0);
}

TEST(DistEnv, NoVariablesMeansOneProcess) {
  const auto env = parse({});
  EXPECT_FALSE(env.distributed());
  EXPECT_EQ(env.source, "none");
}

TEST(DistEnv, ReadsTorchrunsContract) {
  const auto env = parse({{"RANK", "3"},
                          {"WORLD_SIZE", "4"},
                          {"LOCAL_RANK", "1"},
                          {"LOCAL_WORLD_SIZE", "2"},
                          {"MASTER_ADDR", "10.0.0.1"},
                          {"MASTER_PORT", "29600"},
                          {"TORCHELASTIC_RESTART_COUNT", "2"},
                          {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
  EXPECT_TRUE(env.distributed());
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.world_size, 4);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.local_world_size, 2);
  EXPECT_EQ(env.master_addr, "10.0.0.1");
  EXPECT_EQ(env.master_port, 29600);
  EXPECT_EQ(env.restart_count, 2);
  EXPECT_TRUE(env.agent_hosts_store);
  EXPECT_EQ(env.source, "torchrun");
}

TEST(DistEnv, ReadsSlurm) {
  const auto env = parse({{"SLURM_PROCID", "5"},
                          {"SLURM_NTASKS", "8"},
                          {"SLURM_LOCALID", "1"},
                          {"SLURM_NTASKS_PER_NODE", "4(x2)"},
                          {"MASTER_ADDR", "node01"}});
  EXPECT_EQ(env.source, "slurm");
  EXPECT_EQ(env.rank, 5);
  EXPECT_EQ(env.world_size, 8);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.local_world_size, 4);
  EXPECT_EQ(env.master_addr, "node01");
}

TEST(DistEnv, BadValuesNameTheVariable) {
  auto message = [](const std::map<std::string, std::string>& vars) {
    try {
      parse(vars);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({{"RANK", "x"}, {"WORLD_SIZE", "2"}}).find("RANK='x'"), std::string::npos);
  EXPECT_NE(message({{"RANK", "2"}, {"WORLD_SIZE", "2"}}).find("RANK >= WORLD_SIZE"), std::string::npos);
  EXPECT_NE(message({{"RANK", "0"}}).find("RANK and WORLD_SIZE"), std::string::npos);
  EXPECT_NE(message({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}}).find("MASTER_PORT"),
            std::string::npos);
  EXPECT_NE(message({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_NTASKS_PER_NODE", "2"}}).find("MASTER_ADDR"),
            std::string::npos);
}

// The ranks here are threads sharing LibTorch's global generator: seeding and building a model
// must not interleave, or the replicas start from different weights.
template <typename Model, typename... Args>
std::unique_ptr<Model> seeded(std::uint64_t seed, Args... args) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  torch::manual_seed(seed);
  return std::make_unique<Model>(args...);
}

// Runs fn(rank) on `world` threads, each with its own group on one in-memory rendezvous.
template <typename Fn>
void on_ranks(int world, Fn fn, double timeout_seconds = 30) {
  auto rendezvous = make_in_process_rendezvous();
  std::vector<std::future<void>> done;
  for (int r = 0; r < world; ++r)
    done.push_back(std::async(std::launch::async, [&, r] {
      GroupOptions options;
      options.timeout = std::chrono::milliseconds(static_cast<int>(timeout_seconds * 1000));
      options.fingerprint = "same job";
      fn(r, join_in_process(rendezvous, r, world, options));
    }));
  for (auto& f : done) f.get();
}

TEST(ProcessGroup, CollectivesOverGlooBetweenThreads) {
  on_ranks(2, [](int rank, std::shared_ptr<ProcessGroup> group) {
    EXPECT_EQ(group->world_size(), 2);
    EXPECT_EQ(group->rank(), rank);
    std::vector<at::Tensor> t{torch::full({3}, static_cast<float>(rank + 1))};
    group->allreduce_sum(t);
    EXPECT_TRUE(torch::equal(t[0], torch::full({3}, 3.0f)));
    std::vector<at::Tensor> b{torch::full({2}, static_cast<float>(rank * 10))};
    group->broadcast(b, 0);
    EXPECT_TRUE(torch::equal(b[0], torch::zeros({2})));
    const auto names = group->all_gather_string("name", "r" + std::to_string(rank));
    EXPECT_EQ(names, (std::vector<std::string>{"r0", "r1"}));
    auto async_t = torch::ones({4});
    auto pending = group->allreduce_sum_async(async_t);
    pending->wait();
    EXPECT_TRUE(torch::equal(async_t, torch::full({4}, 2.0f)));
  });
}

// Groups of one process may start their first collectives at the same moment: torch 2.x's flight
// recorder registers each group in a shared map then, outside its lock (SIGSEGV in 10 of 10 runs of
// this test on torch 2.11 before the starts took turns). The ranks meet at a spin barrier so that
// the starts overlap.
TEST(ProcessGroup, GroupsOfOneProcessStartTheirFirstCollectivesAtOnce) {
  constexpr int kWorld = 6;
  for (int round = 0; round < 40; ++round) {
    std::atomic<int> arrived{0};
    on_ranks(kWorld, [&](int rank, std::shared_ptr<ProcessGroup> group) {
      auto t = torch::full({1}, static_cast<float>(rank));
      arrived.fetch_add(1);
      while (arrived.load() < kWorld) std::this_thread::yield();
      group->allreduce_sum_async(t)->wait();
      EXPECT_EQ(t.item<float>(), kWorld * (kWorld - 1) / 2.0f);
    });
  }
}

// Fail fast, not at the timeout: the timeout is an hour, far beyond the test's own 300 s limit,
// so only a refusal that does not wait for it lets the test finish (no clock is read).
TEST(ProcessGroup, DisagreeingWorldSizesFailFastOnEveryRank) {
  auto rendezvous = make_in_process_rendezvous();
  auto attempt = [&](int rank, int world) {
    GroupOptions options;
    options.timeout = std::chrono::hours(1);
    try {
      join_in_process(rendezvous, rank, world, options);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("joined");
  };
  auto r0 = std::async(std::launch::async, attempt, 0, 2);
  auto r1 = std::async(std::launch::async, attempt, 1, 3);
  const auto m0 = r0.get(), m1 = r1.get();
  EXPECT_NE(m0.find("WORLD_SIZE"), std::string::npos) << m0;
  EXPECT_NE(m1.find("WORLD_SIZE"), std::string::npos) << m1;
}

TEST(ProcessGroup, AMissingRankIsNamedWhenTheTimeoutRunsOut) {
  auto rendezvous = make_in_process_rendezvous();
  GroupOptions options;
  options.timeout = std::chrono::milliseconds(500);
  try {
    join_in_process(rendezvous, 0, 3, options);
    FAIL() << "joined without its peers";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("rank(s) 1, 2 of 3 never joined"), std::string::npos) << m;
  }
}

// A peer that joined but never comes to the collective: the error names the collective, this
// rank and the peer it waits on (pid and host), and the timeout to raise.
TEST(ProcessGroup, ACollectiveThatTimesOutNamesItselfAndThePeer) {
  std::promise<void> rank0_done;
  auto finished = rank0_done.get_future().share();
  on_ranks(
      2,
      [&](int rank, std::shared_ptr<ProcessGroup> group) {
        if (rank == 1) {
          finished.wait();  // alive and connected, but silent
          return;
        }
        std::vector<at::Tensor> t{torch::ones({3})};
        try {
          group->allreduce_sum(t);
          ADD_FAILURE() << "the all-reduce completed without its peer";
        } catch (const Error& e) {
          const std::string m = e.what();
          const std::string who = fmt::format("(pid {} on ", ::getpid());
          EXPECT_NE(m.find("all-reduce failed on rank 0 " + who), std::string::npos) << m;
          EXPECT_NE(m.find("waiting on rank 1 " + who), std::string::npos) << m;
          EXPECT_NE(m.find("dist.timeout_seconds = 1 s"), std::string::npos) << m;
        }
        rank0_done.set_value();
      },
      1.0);
}

// The reducer's gradients equal the mean of what each rank computes alone, with buckets small
// enough that several are in flight during backward.
// `-b auto` on two ranks whose devices allow different batches (here: budgets that fit 96 and 40):
// both train the smaller plan, whole (batch, accumulation, learning rate), and say why.
TEST(BatchAgreement, RanksWithDifferentAnswersTrainTheSmallestPlan) {
  Config config;
  config.optim.lr = 0.001;
  config.loader.batch_size = 32;
  auto found_for = [&](int largest) {
    const BatchPlan plan = plan_batch(largest, /*target_global=*/0, /*world_size=*/2, config);
    return nlohmann::json{{"micro_batch", largest},
                          {"config_patch", config_patch_json(planned_settings(plan, largest))},
                          {"notes", nlohmann::json::array()},
                          {"probes", nlohmann::json::array()}};
  };
  const std::vector<int> largest = {96, 40};
  std::vector<nlohmann::json> agreed(2);
  on_ranks(2, [&](int rank, std::shared_ptr<ProcessGroup> group) {
    agreed[rank] = agree_on_found_batch(*group, found_for(largest[rank]));
  });
  const nlohmann::json smaller = found_for(40);
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE(rank);
    EXPECT_EQ(agreed[rank]["config_patch"], smaller["config_patch"]);
    EXPECT_EQ(agreed[rank]["micro_batch"], 40);
    EXPECT_EQ(agreed[rank]["rank_agreement"]["chosen_rank"], 1);
    EXPECT_EQ(agreed[rank]["rank_agreement"]["planned_micro_batches"], nlohmann::json::array({96, 40}));
    ASSERT_EQ(agreed[rank]["notes"].size(), 1u);
    EXPECT_NE(agreed[rank]["notes"][0].get<std::string>().find("96, 40"), std::string::npos);
  }
  // The plan differs from the larger one's: the agreement changed rank 0's learning rate too.
  EXPECT_NE(agreed[0]["config_patch"]["optim"]["lr"], found_for(96)["config_patch"]["optim"]["lr"]);
}

TEST(GradientReducer, AveragesGradientsInBucketsDuringBackward) {
  torch::manual_seed(3);
  const auto inputs = torch::randn({2, 4, 3, 2, 2});  // [rank, batch, ...]
  const auto labels = torch::tensor({{0, 1, 2, 0}, {1, 1, 0, 2}}, torch::kLong);
  std::vector<std::vector<at::Tensor>> local(2);
  for (int r = 0; r < 2; ++r) {
    torch::manual_seed(9);
    testing::TinyLinear model(3, 2);
    auto loss = torch::nn::functional::cross_entropy(model.forward(inputs[r]), labels[r]);
    loss.backward();
    for (const auto& p : model.parameters()) local[r].push_back(p.grad().clone());
  }
  std::vector<std::vector<at::Tensor>> reduced(2);
  std::vector<double> launched(2);
  on_ranks(2, [&](int rank, std::shared_ptr<ProcessGroup> group) {
    auto owned = seeded<testing::TinyLinear>(9, 3, 2);
    auto& model = *owned;
    GradientReducer reducer(group, model.parameters(), /*bucket_bytes=*/64);
    EXPECT_GE(reducer.num_buckets(), 3);
    reducer.arm();
    torch::nn::functional::cross_entropy(model.forward(inputs[rank]), labels[rank]).backward();
    reducer.finish();
    for (const auto& p : model.parameters()) reduced[rank].push_back(p.grad().clone());
    launched[rank] = reducer.stats().launched_during_backward;
  });
  for (std::size_t k = 0; k < local[0].size(); ++k) {
    const auto mean = (local[0][k] + local[1][k]) / 2;
    EXPECT_TRUE(torch::allclose(reduced[0][k], mean, 1e-6, 1e-7)) << "parameter " << k;
    EXPECT_TRUE(torch::equal(reduced[0][k], reduced[1][k])) << "parameter " << k;
  }
  EXPECT_GT(launched[0], 0.0);  // communication started before backward returned
}

// 2 ranks x (2 micro-batches of 2) give the parameters of one process with one batch of 8, over
// several AdamW steps: the accumulation steps do not communicate, the last one does.
TEST(GradientReducer, TwoRanksWithAccumulationMatchOneBigBatch) {
  torch::manual_seed(21);
  const auto images = torch::randn({8, 3, 2, 2});
  const auto labels = torch::tensor({0, 1, 2, 0, 1, 2, 2, 1}, torch::kLong);
  auto params_of = [](testing::TinyLinear& m) {
    std::vector<at::Tensor> flat;
    for (const auto& p : m.parameters()) flat.push_back(p.detach().flatten());
    return torch::cat(flat);
  };
  OptimConfig oc;
  oc.lr = 0.01;
  torch::manual_seed(4);
  testing::TinyLinear single(3, 2);
  OptimizerSetup single_optim(single, oc);
  TrainStep single_step(single, single_optim.optimizer(), {});
  for (int i = 0; i < 4; ++i) single_step.run({testing::make_batch(images, labels)});
  const auto expected = params_of(single);

  std::vector<at::Tensor> got(2);
  on_ranks(2, [&](int rank, std::shared_ptr<ProcessGroup> group) {
    auto owned = seeded<testing::TinyLinear>(4, 3, 2);
    auto& model = *owned;
    OptimizerSetup optim(model, oc);
    GradientReducer reducer(group, model.parameters(), 1 << 20);
    TrainStepOptions options;
    options.reducer = &reducer;
    options.group = group.get();
    TrainStep step(model, optim.optimizer(), options);
    const int base = rank * 4;
    for (int i = 0; i < 4; ++i) {
      auto r =
          step.run({testing::make_batch(images.slice(0, base, base + 2), labels.slice(0, base, base + 2)),
                    testing::make_batch(images.slice(0, base + 2, base + 4), labels.slice(0, base + 2, base + 4))});
      EXPECT_EQ(r.samples, 8);  // over both ranks
      EXPECT_TRUE(r.applied);
    }
    got[rank] = params_of(model);
  });
  EXPECT_TRUE(torch::allclose(got[0], expected, 1e-5, 1e-6)) << (got[0] - expected).abs().max().item<double>();
  EXPECT_TRUE(torch::equal(got[0], got[1]));
}

// Stands in for a device that refuses an allocation in the forward pass while `fail` is set.
class OomWhenTold : public testing::TinyLinear {
 public:
  OomWhenTold() : TinyLinear(3, 2) {}
  at::Tensor forward(const at::Tensor& x) override {
    if (fail) throw OutOfMemoryError("simulated allocation refusal");
    return TinyLinear::forward(x);
  }
  bool fail = false;
};

// A rank that runs out of memory still joins the step's collectives; every rank then reports
// the out-of-memory error (so all retry the step smaller together), and nothing was applied.
TEST(GradientReducer, AnOutOfMemoryRankMakesEveryRankRetryTheStep) {
  std::vector<std::string> errors(2);
  std::vector<at::Tensor> after(2);
  torch::manual_seed(6);
  const auto images = torch::randn({2, 3, 2, 2});
  on_ranks(2, [&](int rank, std::shared_ptr<ProcessGroup> group) {
    auto owned = seeded<OomWhenTold>(4);
    auto& model = *owned;
    OptimizerSetup optim(model, OptimConfig{});
    GradientReducer reducer(group, model.parameters(), 64);
    TrainStepOptions options;
    options.reducer = &reducer;
    options.group = group.get();
    TrainStep step(model, optim.optimizer(), options);
    const auto before = model.fc->weight.clone();
    Batch b = testing::make_batch(images, torch::tensor({0, 1}, torch::kLong));
    model.fail = rank == 1;
    try {
      step.run({b, b});
    } catch (const OutOfMemoryError& e) {
      errors[rank] = e.what();
    }
    EXPECT_TRUE(torch::equal(before, model.fc->weight));  // the failed step changed nothing
    model.fail = false;
    EXPECT_TRUE(step.run({b}).applied);  // the retry: both ranks in step again
    after[rank] = model.fc->weight.clone();
  });
  EXPECT_NE(errors[0].find("another rank ran out of memory"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("simulated allocation refusal"), std::string::npos) << errors[1];
  EXPECT_TRUE(torch::equal(after[0], after[1]));
}

TEST(Loader, ShardsEachGlobalBatchAcrossRanksAndSeedsByGlobalPosition) {
  auto source = std::make_shared<InMemoryImageSource>(2);
  for (int i = 0; i < 21; ++i) {
    std::vector<std::uint8_t> px(8 * 8 * 3, static_cast<std::uint8_t>(i * 11));
    source->add(std::move(px), 8, 8, PayloadEncoding::kRaw, i % 2);
  }
  AugmentConfig augment;
  augment.image_size = 8;
  auto options = [](int rank, int world, int batch) {
    LoaderOptions o;
    o.batch_size = batch;
    o.workers = 1;
    o.seed = 7;
    o.global_batch = 8;
    o.rank = rank;
    o.world_size = world;
    return o;
  };
  // One process reading micro-batches of 4 (2 per step) vs two ranks reading 2 x 2 each.
  Loader one(source, augment, options(0, 1, 4));
  Loader r0(source, augment, options(0, 2, 2)), r1(source, augment, options(1, 2, 2));
  EXPECT_EQ(one.batches_per_epoch(), 4);  // 21 samples: 2 whole steps of 8
  EXPECT_EQ(r0.batches_per_epoch(), 4);
  one.start_epoch(1);
  r0.start_epoch(1);
  r1.start_epoch(1);
  std::vector<std::uint64_t> ids_one, ids_ranks;
  at::Tensor images_one, images_ranks;
  std::vector<at::Tensor> a, b;
  while (auto x = one.next()) {
    ids_one.insert(ids_one.end(), x->sample_ids.begin(), x->sample_ids.end());
    a.push_back(x->images.clone());
  }
  for (int step = 0; step < 2; ++step)
    for (Loader* l : {&r0, &r1})
      for (int micro = 0; micro < 2; ++micro) {
        auto x = l->next();
        ASSERT_TRUE(x);
        ids_ranks.insert(ids_ranks.end(), x->sample_ids.begin(), x->sample_ids.end());
        b.push_back(x->images.clone());
      }
  EXPECT_EQ(ids_one, ids_ranks);
  EXPECT_TRUE(torch::equal(torch::cat(a), torch::cat(b)));  // same augmentation for the same sample
  EXPECT_EQ(one.unread_sample_ids().size(), 5u);
  std::set<std::uint64_t> all(ids_one.begin(), ids_one.end());
  for (auto id : one.unread_sample_ids()) EXPECT_TRUE(all.insert(id).second);
  EXPECT_EQ(all.size(), 21u);
}

// ---- the launcher's restart delay ----

// The wait before each restart doubles from the first delay to a cap: a command that fails at once
// is not restarted hundreds of times a minute.
TEST(Launcher, TheRestartDelayDoublesUpToItsCap) {
  EXPECT_DOUBLE_EQ(restart_delay(1, 1), 1);
  EXPECT_DOUBLE_EQ(restart_delay(1, 2), 2);
  EXPECT_DOUBLE_EQ(restart_delay(1, 5), 16);
  EXPECT_DOUBLE_EQ(restart_delay(1, 6), kMaxRestartDelaySeconds);
  EXPECT_DOUBLE_EQ(restart_delay(1, 1 << 20), kMaxRestartDelaySeconds);
  EXPECT_DOUBLE_EQ(restart_delay(0, 7), 0);
  EXPECT_DOUBLE_EQ(restart_delay(120, 3), 120);  // a first delay above the cap is the cap
  LaunchOptions o;
  o.command = {"true"};
  o.master_port = 0;
  o.restart_delay_seconds = -1;
  EXPECT_THROW(validate_launch_options(o), UsageError);
}

// ---- the ledger verifier ----

std::string seg(const std::string& id, std::int64_t start, std::int64_t at) {
  return nlohmann::json({{"type", "segment"},
                         {"segment", id},
                         {"rank", 0},
                         {"world_size", 1},
                         {"start_step", start},
                         {"started_at_ms", at}})
             .dump() +
         "\n";
}
std::string epoch_rec(std::int64_t e, std::int64_t steps, std::vector<std::uint64_t> unread) {
  return nlohmann::json({{"type", "epoch"},
                         {"epoch", e},
                         {"steps", steps},
                         {"global_batch", 2},
                         {"unread", unread},
                         {"with_replacement", false}})
             .dump() +
         "\n";
}
std::string step_rec(std::int64_t e, std::int64_t s, std::vector<std::uint64_t> ids) {
  return nlohmann::json({{"type", "step"}, {"epoch", e}, {"step", s}, {"ids", ids}}).dump() + "\n";
}

TEST(Ledger, ExactAcrossARestartThatRedidSteps) {
  const std::vector<std::uint64_t> train{10, 11, 12, 13, 14};
  // First start: steps 1-2 of epoch 0, then a crash; the checkpoint was at step 1.
  std::vector<LedgerFile> files{
      {"a.rank-0.jsonl",
       seg("a", 0, 100) + epoch_rec(0, 2, {14}) + step_rec(0, 1, {12, 10}) + step_rec(0, 2, {13, 11})},
      {"b.rank-0.jsonl", seg("b", 1, 200) + epoch_rec(0, 2, {14}) + step_rec(0, 2, {13, 11}) + "{\"type\":\"st"}};
  const auto report = verify_ledger(files, train);
  ASSERT_EQ(report.epochs.size(), 1u);
  EXPECT_TRUE(report.epochs[0].complete);
  EXPECT_TRUE(report.exact()) << report.to_text();
  EXPECT_EQ(report.superseded, 1);
  EXPECT_EQ(report.torn_lines.size(), 1u);
}

TEST(Ledger, ReportsDuplicatesAndMissingSamples) {
  const std::vector<std::uint64_t> train{10, 11, 12, 13, 14};
  std::vector<LedgerFile> files{{"a.rank-0.jsonl", seg("a", 0, 100) + epoch_rec(0, 2, {14}) + step_rec(0, 1, {12, 10}) +
                                                       step_rec(0, 2, {12, 11})},
                                {"a.rank-1.jsonl", seg("a", 0, 100) + step_rec(0, 1, {99})}};
  const auto report = verify_ledger(files, train);
  EXPECT_FALSE(report.exact());
  const auto& e = report.epochs.at(0);
  EXPECT_EQ(e.duplicated, (std::vector<std::uint64_t>{12}));
  EXPECT_EQ(e.missing, (std::vector<std::uint64_t>{13}));
  EXPECT_EQ(e.unknown, (std::vector<std::uint64_t>{99}));
  EXPECT_NE(report.to_text().find("NOT EXACT"), std::string::npos);
}

TEST(Ledger, AMalformedRecordBeforeTheEndNamesFileAndLine) {
  std::vector<LedgerFile> files{{"a.rank-0.jsonl", seg("a", 0, 1) + "not json\n" + step_rec(0, 1, {1})}};
  try {
    verify_ledger(files, {1});
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("a.rank-0.jsonl:2"), std::string::npos) << e.what();
  }
}

// A step whose lines are gone from every rank's file is a gap: never exact, whether the epoch
// it fell in looks partial (a lost line inside it) or the run's end is missing (a lost tail).
TEST(Ledger, AStepMissingFromTheLedgerIsNotExactAndNamed) {
  const std::vector<std::uint64_t> train{10, 11, 12, 13, 14, 15};
  const std::string head = seg("a", 0, 100) + epoch_rec(0, 3, {});
  const std::vector<LedgerFile> gap{{"a.rank-0.jsonl", head + step_rec(0, 1, {10, 11}) + step_rec(0, 3, {14, 15})}};
  const auto report = verify_ledger(gap, train);
  EXPECT_FALSE(report.exact()) << report.to_text();
  EXPECT_EQ(report.missing_steps, (std::vector<std::pair<std::int64_t, std::int64_t>>{{2, 2}}));
  EXPECT_NE(report.to_text().find("steps never recorded: 2"), std::string::npos) << report.to_text();
  EXPECT_NE(report.to_text().find("result: NOT exact"), std::string::npos) << report.to_text();

  // The last step lost: only the run's own end (summary.json's steps) shows it.
  const std::vector<LedgerFile> tail{{"a.rank-0.jsonl", head + step_rec(0, 1, {10, 11}) + step_rec(0, 2, {12, 13})}};
  EXPECT_TRUE(verify_ledger(tail, train).exact()) << "an unfinished run may stop anywhere";
  const auto ended = verify_ledger(tail, train, /*final_step=*/3);
  EXPECT_FALSE(ended.exact());
  EXPECT_EQ(ended.missing_steps, (std::vector<std::pair<std::int64_t, std::int64_t>>{{3, 3}}));
  EXPECT_EQ(ended.to_json()["missing_steps"], nlohmann::json::parse("[[3, 3]]"));

  // Every step there: exact, with or without the run's end.
  const std::vector<LedgerFile> whole{
      {"a.rank-0.jsonl", head + step_rec(0, 1, {10, 11}) + step_rec(0, 2, {12, 13}) + step_rec(0, 3, {14, 15})}};
  EXPECT_TRUE(verify_ledger(whole, train, 3).exact()) << verify_ledger(whole, train, 3).to_text();
  // A run whose ledger started at a resume (step 4 onwards) has no gap before it.
  const std::vector<LedgerFile> late{{"b.rank-0.jsonl", seg("b", 3, 100) + epoch_rec(1, 3, {}) +
                                                            step_rec(1, 4, {10, 11}) + step_rec(1, 5, {12, 13}) +
                                                            step_rec(1, 6, {14, 15})}};
  EXPECT_TRUE(verify_ledger(late, train, 6).exact()) << verify_ledger(late, train, 6).to_text();
}

// The issue's 1-epoch run: 238 samples, global batch 128, so one step read 128 and 110 (46%) were
// never used. The report says why and whether that is expected, never "left for a later epoch"
// when there is none.
TEST(Ledger, UnreadSamplesAreExplainedByHowTheRunEnded) {
  const std::vector<std::uint64_t> train{10, 11, 12, 13, 14};
  const std::vector<LedgerFile> one_epoch{{"a.rank-0.jsonl", seg("a", 0, 100) + epoch_rec(0, 2, {14}) +
                                                                 step_rec(0, 1, {12, 10}) + step_rec(0, 2, {13, 11})}};
  const auto finished = verify_ledger(one_epoch, train, 2, "completed");
  EXPECT_TRUE(finished.exact()) << finished.to_text();
  const std::string text = finished.to_text();
  EXPECT_EQ(text.find("later epoch"), std::string::npos) << text;
  EXPECT_NE(text.find("4 of 5 training samples used"), std::string::npos) << text;
  EXPECT_NE(text.find("1 of 5 training samples (20%) not read in this epoch"), std::string::npos) << text;
  EXPECT_NE(text.find("short of a whole global batch of 2"), std::string::npos) << text;
  EXPECT_NE(text.find("Expected"), std::string::npos) << text;
  EXPECT_NE(text.find("last epoch, so they were never used"), std::string::npos) << text;
  EXPECT_EQ(finished.to_json()["epochs"][0]["not_used"], 1);
  EXPECT_TRUE(finished.to_json()["epochs"][0]["last_of_run"].get<bool>());

  // Still running: the tail may yet be read by a next epoch.
  EXPECT_NE(verify_ledger(one_epoch, train).to_text().find("has not finished"), std::string::npos);

  // A steps cap inside the epoch: expected, and said so.
  const std::vector<std::uint64_t> six{10, 11, 12, 13, 14, 15};
  const std::vector<LedgerFile> capped{
      {"a.rank-0.jsonl", seg("a", 0, 100) + epoch_rec(0, 3, {}) + step_rec(0, 1, {10, 11}) + step_rec(0, 2, {12, 13})}};
  const auto max_steps = verify_ledger(capped, six, 2, "max_steps");
  EXPECT_TRUE(max_steps.exact()) << max_steps.to_text();
  EXPECT_NE(max_steps.to_text().find("2 of 6 training samples (33%) not read: the run stopped at train.max_steps"),
            std::string::npos)
      << max_steps.to_text();
  // The same epoch cut short by a run that says it completed: a fault.
  const auto completed = verify_ledger(capped, six, 2, "completed");
  EXPECT_FALSE(completed.exact());
  EXPECT_NE(completed.to_text().find("NOT EXPECTED"), std::string::npos) << completed.to_text();

  // A tail as long as a whole global batch cannot be the remainder of the order: a fault.
  const std::vector<LedgerFile> long_tail{
      {"a.rank-0.jsonl", seg("a", 0, 100) + epoch_rec(0, 1, {12, 13, 14}) + step_rec(0, 1, {10, 11})}};
  const auto fault = verify_ledger(long_tail, train, 1, "completed");
  EXPECT_FALSE(fault.exact());
  EXPECT_FALSE(fault.to_json()["epochs"][0]["unused_expected"].get<bool>());
}

// Numbers are range-checked as they are read: an epoch of 23 digits (once read as epoch 0's
// header gone, "9 of 0 steps ... exact"), a negative step, a fractional id each name file:line.
TEST(Ledger, NumbersOutOfRangeNameFileLineAndKey) {
  const auto error_of = [](const std::string& bad_line) {
    try {
      verify_ledger({{"a.rank-0.jsonl", seg("a", 0, 1) + bad_line + step_rec(0, 1, {1})}}, {1});
    } catch (const DataError& e) {
      return std::string(e.what());
    }
    return std::string("<no error>");
  };
  const std::string huge_epoch =
      R"({"type":"epoch","epoch":12345678901234567890123,"steps":1,"global_batch":1,"unread":[]})"
      "\n";
  EXPECT_NE(error_of(huge_epoch).find("a.rank-0.jsonl:2: epoch: expected a whole number from 0 to"), std::string::npos)
      << error_of(huge_epoch);
  EXPECT_NE(error_of(R"({"type":"step","epoch":0,"step":-4,"ids":[1]})"
                     "\n")
                .find("a.rank-0.jsonl:2: step: expected"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type":"step","epoch":0,"step":2,"ids":[1.5]})"
                     "\n")
                .find("a.rank-0.jsonl:2: ids[0]: expected a sample id (a whole number >= 0), got number 1.5"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type":"epoch","epoch":0,"steps":1e30,"global_batch":1,"unread":[]})"
                     "\n")
                .find("a.rank-0.jsonl:2: steps: expected"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type":"mystery"})"
                     "\n")
                .find("a.rank-0.jsonl:2: unknown record type"),
            std::string::npos);
}

TEST(Ledger, WriterAppendsWholeLinesThatTheVerifierReads) {
  testing::ScratchDir dir("ledger");
  {
    LedgerWriter w(dir.path(), "s1", 0, 1, 0);
    w.epoch(0, 1, 2, {}, false);
    w.step(0, 1, {5, 6});
  }
  const auto report = verify_ledger(read_ledger_files(dir.path()), {5, 6});
  EXPECT_TRUE(report.exact()) << report.to_text();
  EXPECT_THROW(read_ledger_files(dir.path() / "nothing"), IoError);
}

}  // namespace
}  // namespace shoplens
