#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include <torch/torch.h>

#include "shoplens/core/errors.h"
#include "shoplens/core/runtime.h"
#include "shoplens/data/image_io.h"
#include "shoplens/data/loader.h"

namespace shoplens {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// Raw RGB payloads in memory: no files, no decoding, deterministic content per sample.
std::shared_ptr<InMemoryImageSource> fake_source(int n, int num_classes = 3) {
  auto src = std::make_shared<InMemoryImageSource>(num_classes);
  for (int i = 0; i < n; ++i) {
    const int h = 40 + i % 7, w = 48 + i % 5;
    std::vector<std::uint8_t> px(static_cast<std::size_t>(h) * w * 3);
    for (std::size_t k = 0; k < px.size(); ++k) px[k] = static_cast<std::uint8_t>((k * 31 + i * 17) % 251);
    src->add(std::move(px), h, w, PayloadEncoding::kRaw, i % num_classes);
  }
  return src;
}

AugmentConfig small_augment() {
  AugmentConfig a;
  a.image_size = 32;
  return a;
}

LoaderOptions options(int workers, int batch = 4) {
  LoaderOptions o;
  o.batch_size = batch;
  o.workers = workers;
  o.prefetch_batches = 3;
  o.seed = 99;
  return o;
}

std::vector<Batch> run_epoch(Loader& loader, std::int64_t epoch, std::int64_t skip = 0) {
  std::vector<Batch> out;
  loader.start_epoch(epoch, skip);
  while (auto b = loader.next()) {
    Batch copy = *b;
    copy.images = b->images.clone();  // the loader may reuse its buffers
    out.push_back(copy);
  }
  return out;
}

TEST(EpochOrder, PermutationDependsOnSeedAndEpochOnly) {
  auto a = epoch_order(100, 1, 0, true);
  EXPECT_EQ(a, epoch_order(100, 1, 0, true));
  EXPECT_NE(a, epoch_order(100, 1, 1, true));
  EXPECT_NE(a, epoch_order(100, 2, 0, true));
  std::set<std::uint32_t> unique(a.begin(), a.end());
  EXPECT_EQ(unique.size(), 100u);
  auto identity = epoch_order(5, 1, 0, false);
  EXPECT_EQ(identity, (std::vector<std::uint32_t>{0, 1, 2, 3, 4}));
}

TEST(Loader, EverySampleOncePerEpochWithShapes) {
  Loader loader(fake_source(22), small_augment(), options(2));
  auto batches = run_epoch(loader, 0);
  ASSERT_EQ(batches.size(), 5u);  // drop_last: 22 / 4
  std::set<std::uint64_t> seen;
  for (const auto& b : batches) {
    EXPECT_EQ(b.images.sizes(), (std::vector<std::int64_t>{4, 3, 32, 32}));
    EXPECT_EQ(b.labels.scalar_type(), torch::kInt64);
    EXPECT_FALSE(b.targets.defined());
    EXPECT_TRUE(torch::isfinite(b.images).all().item<bool>());
    for (auto id : b.sample_ids) EXPECT_TRUE(seen.insert(id).second);
  }
  EXPECT_EQ(seen.size(), 20u);
  EXPECT_EQ(loader.stats().samples, 20u);
}

TEST(Loader, KeepsLastPartialBatchWithoutDropLast) {
  LoaderOptions o = options(2);
  o.drop_last = false;
  Loader loader(fake_source(22), small_augment(), o);
  auto batches = run_epoch(loader, 0);
  ASSERT_EQ(batches.size(), 6u);
  EXPECT_EQ(batches.back().images.size(0), 2);
}

TEST(Loader, DeterministicAcrossWorkerCounts) {
  Loader one(fake_source(30), small_augment(), options(1));
  Loader four(fake_source(30), small_augment(), options(4));
  auto a = run_epoch(one, 3), b = run_epoch(four, 3);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].sample_ids, b[i].sample_ids);
    EXPECT_TRUE(torch::equal(a[i].images, b[i].images)) << "batch " << i;
  }
  auto next_epoch = run_epoch(one, 4);
  EXPECT_NE(next_epoch[0].sample_ids, a[0].sample_ids);
}

TEST(Loader, ResumingMidEpochGivesTheSameRemainingBatches) {
  Loader loader(fake_source(30), small_augment(), options(2));
  auto full = run_epoch(loader, 1);
  auto resumed = run_epoch(loader, 1, /*skip=*/3);
  ASSERT_EQ(resumed.size(), full.size() - 3);
  for (std::size_t i = 0; i < resumed.size(); ++i) {
    EXPECT_EQ(resumed[i].index, full[i + 3].index);
    EXPECT_EQ(resumed[i].sample_ids, full[i + 3].sample_ids);
    EXPECT_TRUE(torch::equal(resumed[i].images, full[i + 3].images));
  }
}

TEST(Loader, SoftTargetsWhenMixingIsOn) {
  AugmentConfig a = small_augment();
  a.mixup_alpha = 0.4;
  a.cutmix_alpha = 1.0;
  Loader loader(fake_source(16), a, options(2));
  auto batches = run_epoch(loader, 0);
  for (const auto& b : batches) {
    ASSERT_TRUE(b.targets.defined());
    EXPECT_EQ(b.targets.sizes(), (std::vector<std::int64_t>{4, 3}));
    EXPECT_TRUE(torch::allclose(b.targets.sum(1), torch::ones({4})));
  }
}

TEST(Loader, EvalTransformIsDeterministicAndUnshuffled) {
  LoaderOptions o = options(2);
  o.train = false;
  o.shuffle = false;
  Loader loader(fake_source(8), small_augment(), o);
  auto a = run_epoch(loader, 0), b = run_epoch(loader, 5);
  EXPECT_EQ(a[0].sample_ids, (std::vector<std::uint64_t>{0, 1, 2, 3}));
  EXPECT_TRUE(torch::equal(a[1].images, b[1].images));
}

TEST(Loader, CorruptPayloadSurfacesAsDataErrorNamingTheSample) {
  auto src = std::make_shared<InMemoryImageSource>(2);
  for (int i = 0; i < 4; ++i) src->add({0xFF, 0xD8, 0xFF, 0x00, 0x01}, 10, 10, PayloadEncoding::kJpeg, 0);
  Loader loader(src, small_augment(), options(2));
  loader.start_epoch(0);
  EXPECT_THAT([&] { loader.next(); }, ThrowsMessage<DataError>(HasSubstr("sample ")));
}

TEST(Loader, RejectsEmptySourceAndTooFewSamples) {
  EXPECT_THROW(Loader(std::make_shared<InMemoryImageSource>(2), small_augment(), options(1)), DataError);
  Loader loader(fake_source(3), small_augment(), options(1));
  EXPECT_THROW(loader.start_epoch(0), DataError);
}

// A CUDA job's batches travel pinned (one DMA per step instead of a staged copy); a CPU job's stay
// pageable and pooled. Whether the device is named or found, the options follow the job's device.
TEST(LoaderOptions, PinBatchesOnlyForACudaJob) {
  Config config;
  config.train.device = DeviceChoice::kCpu;
  EXPECT_FALSE(loader_options_from_config(config, true).pin_memory);
  config.train.device = DeviceChoice::kCuda;
  EXPECT_TRUE(loader_options_from_config(config, true).pin_memory);
  EXPECT_TRUE(loader_options_from_config(config, false).pin_memory);
  config.loader.pin_memory = false;
  EXPECT_FALSE(loader_options_from_config(config, true).pin_memory);
  config.loader.pin_memory = true;
  config.train.device = DeviceChoice::kAuto;
  EXPECT_EQ(loader_options_from_config(config, true).pin_memory, cuda_available());
}

// On the device: pinned batches hold what pageable ones hold, and their non-blocking copies to
// the GPU arrive intact even though the loader keeps building the next batches meanwhile.
TEST(GpuLoader, PinnedBatchesEqualPageableOnesOnTheDevice) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  LoaderOptions pinned = options(2);
  pinned.pin_memory = true;
  Loader plain_loader(fake_source(30), small_augment(), options(2));
  Loader pinned_loader(fake_source(30), small_augment(), pinned);
  const auto plain = run_epoch(plain_loader, 1);
  pinned_loader.start_epoch(1);
  std::vector<at::Tensor> on_device;
  while (auto b = pinned_loader.next()) {
    EXPECT_TRUE(b->images.is_pinned());
    on_device.push_back(b->images.to(torch::kCUDA, /*non_blocking=*/true));
  }
  torch::cuda::synchronize();
  ASSERT_EQ(on_device.size(), plain.size());
  for (std::size_t i = 0; i < plain.size(); ++i)
    EXPECT_TRUE(torch::equal(on_device[i].cpu(), plain[i].images)) << "batch " << i;
}

}  // namespace
}  // namespace shoplens
