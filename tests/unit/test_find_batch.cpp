// find-batch's pieces below the CLI: the CPU budget allocator, the job probe on the real step,
// the accumulation plan and learning-rate scaling, the config patch, fingerprint and cache,
// and loader.batch_size "auto" in the config.
#include <gtest/gtest.h>

#include <malloc.h>

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "shoplens/batch/find_batch.h"
#include "shoplens/batch/job_probe.h"
#include "shoplens/batch/memory_probe.h"
#include "shoplens/core/config.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/runtime.h"
#include "shoplens/models/classifier.h"
#include "sanitizer.h"
#include "test_util.h"

namespace shoplens {
namespace {

constexpr std::int64_t kMiB = 1024 * 1024;

TEST(CpuBudgetAllocator, CountsLiveAndPeakBytesOfLibTorchTensors) {
  auto memory = make_cpu_memory_probe();
  const std::int64_t before = memory->stats().allocated_bytes;
  memory->reset_peak();
  {
    auto a = torch::empty({1024, 1024}, torch::kFloat);  // 4 MiB
    EXPECT_EQ(memory->stats().allocated_bytes - before, 4 * kMiB);
    auto b = torch::empty({512, 1024}, torch::kFloat);  // 2 MiB
    EXPECT_EQ(memory->stats().allocated_bytes - before, 6 * kMiB);
  }
  EXPECT_EQ(memory->stats().allocated_bytes, before);
  EXPECT_EQ(memory->stats().peak_allocated_bytes - before, 6 * kMiB);
  memory->reset_peak();
  EXPECT_EQ(memory->stats().peak_allocated_bytes, before);
}

TEST(CpuBudgetAllocator, RefusesBeyondTheBudgetWithLibTorchsOutOfMemoryError) {
  auto memory = make_cpu_memory_probe();
  const std::int64_t live = memory->stats().allocated_bytes;
  memory->set_budget(live + 8 * kMiB);
  auto fits = torch::zeros({1024, 1024}, torch::kFloat);                                 // 4 MiB
  EXPECT_THROW(torch::zeros({1024, 1024 + 512}, torch::kFloat), c10::OutOfMemoryError);  // 6 more MiB
  try {
    (void)torch::ones({2048, 1024}, torch::kFloat);
    FAIL() << "expected an out-of-memory error";
  } catch (const std::exception& e) {
    EXPECT_TRUE(is_out_of_memory(e));
    EXPECT_NE(std::string(e.what()).find("CPU memory budget exceeded"), std::string::npos);
  }
  const auto stats = memory->stats();
  EXPECT_GE(stats.refused_allocations, 2);
  EXPECT_EQ(stats.last_refused_need_bytes, live + 4 * kMiB + 8 * kMiB);
  EXPECT_EQ(stats.allocated_bytes, live + 4 * kMiB);  // refused requests leave nothing behind
}

TEST(CpuBudgetAllocator, TheProbeRestoresThePreviousBudget) {
  auto outer = make_cpu_memory_probe();
  outer->set_budget(0);
  {
    auto inner = make_cpu_memory_probe();
    inner->set_budget(kMiB);
    EXPECT_EQ(outer->budget(), kMiB);  // one allocator for the process
    EXPECT_THROW(torch::empty({4 * kMiB}, torch::kByte), c10::OutOfMemoryError);
  }
  EXPECT_EQ(outer->budget(), 0);
  EXPECT_NO_THROW(torch::empty({4 * kMiB}, torch::kByte));
}

// A CPU budget covers the process: with the retaining heap policy (tune_host_allocator), identical
// epochs under 96 MiB held 52 to 110 MiB depending on how the threads' frees interleaved. Setting
// a budget makes the heap hand freed large blocks back, so the process holds what is live.
TEST(CpuBudgetAllocator, ABudgetMakesTheHeapGiveBackLargeFreedBlocks) {
  SKIP_WHERE_PROCESS_MEMORY_IS_NOT_THE_PRODUCTS();
  ASSERT_TRUE(tune_host_allocator());
  auto memory = make_cpu_memory_probe();
  memory->set_budget(1024 * kMiB);
  const struct mallinfo2 before = mallinfo2();
  void* volatile block = std::malloc(8 * kMiB);  // volatile: the compiler may not drop the pair
  EXPECT_GE(mallinfo2().hblkhd, before.hblkhd + 8 * kMiB) << "an 8 MiB block stayed in the retained heap";
  std::free(block);
  EXPECT_EQ(mallinfo2().hblkhd, before.hblkhd) << "a freed 8 MiB block was kept";
  memory->set_budget(0);
}

// Under a budget the tensors' large blocks are kept for the next request of their size (a step
// asks for the same sizes every step: no mapping and page faults again), but never beyond the
// high-water mark of the blocks in use: the process holds no more than when it hands them back.
TEST(CpuBudgetAllocator, KeepsFreedLargeBlocksForReuseWithinTheLivePeak) {
  SKIP_WHERE_PROCESS_MEMORY_IS_NOT_THE_PRODUCTS();  // and ASan builds keep no blocks of their own
  auto memory = make_cpu_memory_probe();
  memory->set_budget(1024 * kMiB);
  memory->release_cached();
  const auto kept = [&] { return memory->stats().reserved_bytes - memory->stats().allocated_bytes; };
  void* first = nullptr;
  {
    const at::Tensor t = torch::empty({8 * kMiB}, torch::kByte);
    first = t.data_ptr();
  }
  EXPECT_GE(kept(), 8 * kMiB);
  {
    const at::Tensor again = torch::empty({8 * kMiB}, torch::kByte);
    EXPECT_EQ(again.data_ptr(), first) << "the freed block of the same size was not reused";
    EXPECT_EQ(kept(), 0);
  }
  memory->release_cached();
  EXPECT_EQ(kept(), 0);
  {
    std::vector<at::Tensor> three;
    for (int i = 0; i < 3; ++i) three.push_back(torch::empty({8 * kMiB}, torch::kByte));
  }  // 24 MiB in use at the peak, all kept now
  EXPECT_GE(kept(), 24 * kMiB);
  {
    const at::Tensor larger = torch::empty({16 * kMiB}, torch::kByte);  // a size not kept
    EXPECT_LE(kept() + 16 * kMiB, 24 * kMiB + kMiB) << "kept blocks took the process past its live peak";
    EXPECT_GE(kept(), 8 * kMiB) << "more was unmapped than the peak required";
  }
  memory->set_budget(0);  // without a budget nothing is kept
  EXPECT_EQ(kept(), 0);
  { const at::Tensor unbudgeted = torch::empty({8 * kMiB}, torch::kByte); }
  EXPECT_EQ(kept(), 0);
}

Config tiny_job() {
  Config c;
  c.model.name = "small_cnn";
  c.augment.image_size = 32;
  c.loader.workers = 1;
  c.loader.prefetch_batches = 2;
  c.run.threads = 1;
  c.train.device = DeviceChoice::kCpu;
  return c;
}

// train.ema_decay keeps a second copy of the weights all run long: the probe holds it too, and the
// static estimate counts it (the search had planned as if it were not there).
TEST(JobProbe, TheEmaCopyOfTheWeightsIsPartOfTheJob) {
  set_compute_threads(1);
  auto memory = make_cpu_memory_probe();
  memory->set_budget(0);
  Config plain = tiny_job();
  Config with_ema = plain;
  with_ema.train.ema_decay = 0.999;
  std::int64_t static_plain = 0, baseline_plain = 0;
  {
    JobProbe job(plain, 5, *memory);
    static_plain = job.static_bytes_estimate();
    baseline_plain = job.run(4, 2).baseline_bytes;
  }
  JobProbe job(with_ema, 5, *memory);
  const auto probe = job.run(4, 2);
  ASSERT_EQ(probe.outcome, ProbeResult::Outcome::kRan) << probe.error;
  const std::int64_t weights = tensor_bytes(make_model(model_spec_from_config(with_ema, 5))->parameters());
  EXPECT_EQ(job.static_bytes_estimate() - static_plain, weights);
  EXPECT_GE(probe.baseline_bytes - baseline_plain, weights);
}

TEST(JobProbe, MeasuresTheRealStepAndReportsOutOfMemoryAsAnOutcome) {
  set_compute_threads(1);
  auto memory = make_cpu_memory_probe();
  memory->set_budget(0);
  JobProbe job(tiny_job(), 5, *memory);
  EXPECT_EQ(job.loader_batches_held(), 2 + 1 + 2);
  const auto small = job.run(2, 2);
  const auto large = job.run(16, 2);
  ASSERT_EQ(small.outcome, ProbeResult::Outcome::kRan) << small.error;
  ASSERT_EQ(large.outcome, ProbeResult::Outcome::kRan) << large.error;
  EXPECT_GT(large.peak_bytes, small.peak_bytes);
  // The held loader buffers alone grow by 5 x 14 x 3 x 32 x 32 x 4 bytes.
  EXPECT_GT(large.peak_bytes - small.peak_bytes, 5LL * 14 * 3 * 32 * 32 * 4);
  EXPECT_GE(small.baseline_bytes, job.static_bytes_estimate());  // weights, gradients, AdamW state stay live
  EXPECT_GT(large.images_per_second, 0.0);

  memory->set_budget(memory->stats().allocated_bytes + 256 * 1024);
  const auto refused = job.run(64, 2);
  EXPECT_EQ(refused.outcome, ProbeResult::Outcome::kOutOfMemory);
  EXPECT_FALSE(refused.error.empty());
  EXPECT_GT(refused.peak_bytes, 0);  // what was needed when refused
  memory->set_budget(0);
  EXPECT_EQ(job.run(4, 1).outcome, ProbeResult::Outcome::kRan);  // the job is usable after an OOM
}

// A text job as `find-batch --shards TEXT` resolves it: vocabulary and metadata from the dataset.
Config tiny_text_job(int max_length) {
  Config c = tiny_job();
  c.model.name = "text_tiny";
  c.text.vocab_size = 512;
  c.text.max_length = max_length;
  c.text.categorical_cardinalities = {3, 5};
  c.text.numeric_fields = 2;
  c.find_batch.cache = false;
  return c;
}

// A step that runs out of memory in its backward leaves its queued autograd tasks (nodes with their
// saved activations) in the engine's ready queue until the next backward on that device: the next
// probe started with them live and counted them as its own (`find-batch --shards TEXT -m text_tiny
// --memory-budget 2GiB`: batch 3 after an OOM at 104 peaked at 984 MiB, batch 2 at 61 MiB, and the
// search then found no batch). The step drains them when it fails.
TEST(JobProbe, AProbeAfterAnOutOfMemoryMeasuresOnlyItsOwnBatch) {
  set_compute_threads(1);
  auto memory = make_cpu_memory_probe();
  memory->set_budget(0);
  JobProbe job(tiny_text_job(128), 2, *memory);
  const auto small = job.run(2, 2);
  const auto large = job.run(48, 2);
  ASSERT_EQ(small.outcome, ProbeResult::Outcome::kRan) << small.error;
  ASSERT_EQ(large.outcome, ProbeResult::Outcome::kRan) << large.error;
  const std::int64_t live = memory->stats().allocated_bytes;  // weights, gradients, AdamW state
  // Room for most of batch 48's step: it fails late, in its backward, with the graph half walked.
  memory->set_budget(live + (large.peak_bytes - live) * 9 / 10);
  const auto refused = job.run(48, 2);
  ASSERT_EQ(refused.outcome, ProbeResult::Outcome::kOutOfMemory);
  EXPECT_LE(memory->stats().allocated_bytes, live) << "the failed step's tensors are still alive";
  const auto again = job.run(2, 2);
  ASSERT_EQ(again.outcome, ProbeResult::Outcome::kRan) << again.error;
  EXPECT_LE(again.peak_bytes, small.peak_bytes + small.peak_bytes / 10);
  EXPECT_LE(again.step_spread_bytes, small.peak_bytes / 10);
  memory->set_budget(0);
}

TEST(FindBatchText, TheProbeBatchIsAtMaxLengthWithEveryTokenReal) {
  set_compute_threads(1);
  const Config c = tiny_text_job(48);
  auto model = make_model(model_spec_from_config(c, 2));
  ASSERT_TRUE(model->is_text());
  const Batch b = model->example_batch(3);
  ASSERT_TRUE(b.is_text());
  EXPECT_EQ(b.input_ids.sizes(), (std::vector<std::int64_t>{3, 48}));
  EXPECT_EQ(b.padded_tokens(), 3 * 48);
  EXPECT_EQ(b.real_tokens(), 3 * 48);  // no padding: the longest a step can see
  EXPECT_TRUE(b.attention_mask.all().item<bool>());
  EXPECT_EQ(b.meta_categorical.sizes(), (std::vector<std::int64_t>{3, 2}));
  EXPECT_EQ(b.meta_numeric.sizes(), (std::vector<std::int64_t>{3, 2}));
  EXPECT_GE(b.input_ids.min().item<std::int64_t>(), 2);  // no pad or cls ids
  EXPECT_LT(b.input_ids.max().item<std::int64_t>(), 512);

  // The probe's peak follows max_length: the same batch needs more at 96 tokens than at 48.
  auto memory = make_cpu_memory_probe();
  memory->set_budget(0);
  JobProbe short_job(c, 2, *memory);
  const auto at48 = short_job.run(8, 2);
  JobProbe long_job(tiny_text_job(96), 2, *memory);
  const auto at96 = long_job.run(8, 2);
  ASSERT_EQ(at48.outcome, ProbeResult::Outcome::kRan) << at48.error;
  ASSERT_EQ(at96.outcome, ProbeResult::Outcome::kRan) << at96.error;
  // At least the doubled activations of the two layers' MLPs (8 x 48 more rows of 512 floats each).
  EXPECT_GT(at96.peak_bytes - at48.peak_bytes, 2LL * 8 * 48 * 512 * 4);
}

TEST(FindBatchText, FindsAVerifiedBatchUnderACpuBudgetAndReportsItsTokenBudget) {
  set_compute_threads(1);
  Config c = tiny_text_job(64);
  c.train.memory_budget = parse_byte_size("40MiB", "test");
  const FindBatchResult r = find_batch(c, 2, /*use_cache=*/false);
  EXPECT_GT(r.micro_batch, 1);
  EXPECT_EQ(r.sequence_length, 64);
  EXPECT_EQ(r.token_budget, static_cast<std::int64_t>(r.micro_batch) * 64);
  const auto doc = r.to_json();
  EXPECT_EQ(doc["sequence_length"], 64);
  EXPECT_EQ(doc["token_budget"], r.token_budget);
  EXPECT_EQ(doc["config_patch"]["loader"]["token_budget"], r.token_budget);
  EXPECT_EQ(doc["budget_bytes"], 40 * kMiB);
  EXPECT_GT(doc["measured_peak_bytes"].get<std::int64_t>(), 0);
  EXPECT_LE(doc["measured_peak_bytes"].get<std::int64_t>(), doc["usable_bytes"].get<std::int64_t>());
  EXPECT_NE(r.to_table().find("token budget " + std::to_string(r.token_budget)), std::string::npos) << r.to_table();

  // Twice the length leaves fewer rows in the same budget.
  Config longer = tiny_text_job(128);
  longer.train.memory_budget = parse_byte_size("40MiB", "test");
  const FindBatchResult l = find_batch(longer, 2, /*use_cache=*/false);
  EXPECT_LT(l.micro_batch, r.micro_batch);
  EXPECT_EQ(l.sequence_length, 128);
}

TEST(FindBatchCache, TextShapeIsPartOfTheFingerprint) {
  const Config c = tiny_text_job(64);
  const auto base = find_batch_fingerprint(c, 2, "cpu", 1 << 30, 1 << 29);
  Config other = c;
  other.text.max_length = 128;
  EXPECT_NE(base, find_batch_fingerprint(other, 2, "cpu", 1 << 30, 1 << 29));
  other = c;
  other.text.vocab_size = 1024;
  EXPECT_NE(base, find_batch_fingerprint(other, 2, "cpu", 1 << 30, 1 << 29));
  other = c;
  other.text.categorical_cardinalities = {3, 6};
  EXPECT_NE(base, find_batch_fingerprint(other, 2, "cpu", 1 << 30, 1 << 29));
}

TEST(PlanBatch, ReachesTheTargetGlobalBatchWithTheLargestMicroBatch) {
  Config c;
  c.find_batch.lr_scaling = LrScaling::kLinear;
  c.loader.batch_size = 32;
  c.optim.lr = 0.001;
  auto plan = plan_batch(300, 512, 1, c);
  EXPECT_EQ(plan.micro_batch, 256);
  EXPECT_EQ(plan.accumulation_steps, 2);
  EXPECT_EQ(plan.global_batch, 512);
  EXPECT_NEAR(plan.lr, 0.016, 1e-12);  // linear: 512 / 32
  EXPECT_GE(plan.warmup_epochs, 1.0);

  plan = plan_batch(300, 1024, 2, c);  // two ranks
  EXPECT_EQ(plan.micro_batch, 256);
  EXPECT_EQ(plan.accumulation_steps, 2);
  EXPECT_EQ(plan.global_batch, 1024);

  plan = plan_batch(100, 0, 1, c);  // no target: one micro-batch per step
  EXPECT_EQ(plan.micro_batch, 100);
  EXPECT_EQ(plan.accumulation_steps, 1);

  plan = plan_batch(100, 1009, 1, c);  // a prime: no exact split, rounded up with a note
  EXPECT_GE(plan.global_batch, 1009);
  EXPECT_LE(plan.micro_batch, 100);
  EXPECT_FALSE(plan.notes.empty());

  c.find_batch.lr_scaling = LrScaling::kSqrt;
  plan = plan_batch(128, 128, 1, c);
  EXPECT_NEAR(plan.lr, 0.002, 1e-12);  // sqrt(128 / 32) = 2
  c.find_batch.lr_scaling = LrScaling::kNone;
  c.find_batch.reference_batch = 64;
  plan = plan_batch(128, 128, 1, c);
  EXPECT_NEAR(plan.lr, 0.001, 1e-12);
  EXPECT_EQ(plan.reference_batch, 64);
}

TEST(PlanBatch, AutoScalingIsSqrtForAdaptiveOptimizersAndLinearForSgd) {
  Config c;
  c.loader.batch_size = 32;
  c.optim.lr = 0.001;
  ASSERT_EQ(c.find_batch.lr_scaling, LrScaling::kAuto);  // the default
  c.optim.name = OptimizerKind::kAdamW;
  auto plan = plan_batch(128, 0, 1, c);
  EXPECT_EQ(plan.lr_scaling, "sqrt");
  EXPECT_NEAR(plan.lr, 0.002, 1e-12);
  c.optim.name = OptimizerKind::kSgd;
  plan = plan_batch(128, 0, 1, c);
  EXPECT_EQ(plan.lr_scaling, "linear");
  EXPECT_NEAR(plan.lr, 0.004, 1e-12);
}

// The GPU study: batch 64 at 2x the images/s of 32, trained for the same 5 epochs, lost 2 points of
// macro-F1 (half the optimizer steps). train_budget time spends the speed-up on epochs instead.
TEST(PlanBatch, ATimeBudgetTurnsTheMeasuredSpeedupIntoEpochs) {
  Config c;
  c.loader.batch_size = 32;
  c.train.epochs = 5;
  ASSERT_EQ(c.find_batch.train_budget, TrainBudget::kTime);  // the default
  auto plan = plan_batch(64, 0, 1, c);
  budget_epochs_by_time(plan, 2.0, c);
  EXPECT_EQ(plan.epochs, 10);
  EXPECT_FALSE(plan.notes.empty());
  EXPECT_EQ(config_patch_json(planned_settings(plan, 64))["train"]["epochs"], 10);
  Config applied = c;
  apply_planned_settings(applied, planned_settings(plan, 64));
  EXPECT_EQ(applied.train.epochs, 10);
  EXPECT_EQ(applied.loader.batch_size, 64);

  auto barely = plan_batch(64, 0, 1, c);
  budget_epochs_by_time(barely, 1.05, c);  // 5.25 epochs round to 5: nothing to change
  EXPECT_EQ(barely.epochs, 0);
  EXPECT_FALSE(config_patch_json(planned_settings(barely, 64))["train"].contains("epochs"));
  Config same = c;
  apply_planned_settings(same, planned_settings(barely, 64));
  EXPECT_EQ(same.train.epochs, 5);

  c.find_batch.train_budget = TrainBudget::kEpochs;
  auto kept = plan_batch(64, 0, 1, c);
  budget_epochs_by_time(kept, 2.0, c);
  EXPECT_EQ(kept.epochs, 0);
  EXPECT_DOUBLE_EQ(kept.speedup, 2.0);  // still reported
}

TEST(PlanBatch, ThePatchAppliesToAConfig) {
  Config c;
  const auto plan = plan_batch(48, 96, 1, c);
  const auto patch = config_patch_json(planned_settings(plan, 48));
  EXPECT_EQ(patch["loader"]["batch_size"], 48);
  EXPECT_EQ(patch["train"]["accumulation_steps"], 2);
  EXPECT_EQ(patch["train"]["eval_batch_size"], 48);
  Config patched = c;
  patched.loader.auto_batch = true;
  apply_planned_settings(patched, planned_settings_from_json(patch, "test"));
  EXPECT_EQ(patched.loader.batch_size, 48);
  EXPECT_FALSE(patched.loader.auto_batch);
  EXPECT_EQ(patched.train.accumulation_steps, 2);
  EXPECT_EQ(patched.train.eval_batch_size, 48);
  EXPECT_DOUBLE_EQ(patched.optim.lr, plan.lr);
  EXPECT_DOUBLE_EQ(patched.schedule.warmup_epochs, plan.warmup_epochs);
  // A plan read back from another process is checked field by field, naming the key.
  nlohmann::json bad = patch;
  bad["loader"]["batch_size"] = 0;
  try {
    planned_settings_from_json(bad, "child.json");
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("loader.batch_size"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("child.json"), std::string::npos) << e.what();
  }
}

TEST(FindBatchCache, FingerprintFollowsWhatDecidesTheAnswer) {
  Config c;
  const auto base = find_batch_fingerprint(c, 12, "cpu", 1 << 30, 1 << 29);
  EXPECT_EQ(base, find_batch_fingerprint(c, 12, "cpu", 1 << 30, 1 << 29));
  EXPECT_NE(base, find_batch_fingerprint(c, 12, "cpu", 1 << 30, 1 << 28));     // budget
  EXPECT_NE(base, find_batch_fingerprint(c, 12, "cuda:0", 1 << 30, 1 << 29));  // device
  Config other = c;
  other.train.precision = Precision::kBf16;
  EXPECT_NE(base, find_batch_fingerprint(other, 12, "cpu", 1 << 30, 1 << 29));
  other = c;
  other.augment.mixup_alpha = 0.2;  // soft targets
  EXPECT_NE(base, find_batch_fingerprint(other, 12, "cpu", 1 << 30, 1 << 29));
  other = c;
  other.find_batch.target_global_batch = 512;  // planning only: the search answer is the same
  EXPECT_EQ(base, find_batch_fingerprint(other, 12, "cpu", 1 << 30, 1 << 29));
}

TEST(FindBatchCache, RoundTripsAndIgnoresTornEntries) {
  testing::ScratchDir dir("fb-cache");
  Config c;
  c.find_batch.cache_dir = dir.path().string();
  EXPECT_FALSE(read_cached_search(c, "abc").has_value());
  nlohmann::json doc = {
      {"fingerprint", "abc"}, {"found_batch", 40}, {"micro_batch", 40}, {"probes", nlohmann::json::array()}};
  write_cached_search(c, "abc", doc);
  auto back = read_cached_search(c, "abc");
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ((*back)["micro_batch"], 40);
  testing::write_text(dir.path() / "find-batch" / "abc.json", "{\"fingerprint\": \"abc\", \"found_ba");
  EXPECT_FALSE(read_cached_search(c, "abc").has_value());
  testing::write_text(dir.path() / "find-batch" / "abc.json", doc.dump());  // but the wrong key
  EXPECT_FALSE(read_cached_search(c, "abd").has_value());
}

TEST(ConfigAutoBatch, BatchSizeTakesANumberOrAuto) {
  auto config = load_config(std::nullopt, {"loader.batch_size=auto"});
  EXPECT_TRUE(config.loader.auto_batch);
  EXPECT_EQ(config_to_json(config)["loader"]["batch_size"], "auto");
  config = load_config(std::nullopt, {"loader.batch_size=auto", "loader.batch_size=24"});
  EXPECT_FALSE(config.loader.auto_batch);
  EXPECT_EQ(config.loader.batch_size, 24);
  EXPECT_THROW(load_config(std::nullopt, {"loader.batch_size=big"}), ConfigError);
  EXPECT_THROW(load_config(std::nullopt, {"loader.batch_size=0"}), ConfigError);
  try {
    config_from_json(nlohmann::json{{"loader", {{"batch_size", "automatic"}}}}, "c.json");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("integer or \"auto\""), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_config(std::nullopt, {"train.memory_budget=lots"}), ConfigError);
  EXPECT_EQ(load_config(std::nullopt, {"train.memory_budget=2GiB"}).train.memory_budget,
            parse_byte_size("2GiB", "test"));
}

}  // namespace
}  // namespace shoplens
