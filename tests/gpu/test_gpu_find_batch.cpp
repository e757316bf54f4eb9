// CUDA only (ctest label gpu; run on the lent GPU machine): the caching allocator's probe,
// its memory-fraction budget, and find-batch's job probe on the device.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "shoplens/batch/job_probe.h"
#include "shoplens/batch/memory_probe.h"
#include "shoplens/core/config.h"
#include "shoplens/core/runtime.h"

namespace shoplens {
namespace {

constexpr std::int64_t kMiB = 1024 * 1024;

TEST(GpuMemoryProbe, SeesCachingAllocatorPeaksAndEnforcesTheBudget) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  auto memory = make_cuda_memory_probe(0);
  EXPECT_GT(memory->device_total_bytes(), 0);
  EXPECT_GT(memory->device_free_bytes(), 0);
  memory->release_cached();
  memory->reset_peak();
  const std::int64_t before = memory->stats().allocated_bytes;
  {
    auto t = torch::empty({64 * kMiB}, torch::TensorOptions().device(torch::kCUDA).dtype(torch::kByte));
    EXPECT_GE(memory->stats().allocated_bytes - before, 64 * kMiB);
  }
  EXPECT_GE(memory->stats().peak_allocated_bytes - before, 64 * kMiB);
  EXPECT_GE(memory->stats().peak_reserved_bytes, memory->stats().peak_allocated_bytes);
  memory->set_budget(256 * kMiB);
  try {
    auto big = torch::empty({1024 * kMiB}, torch::TensorOptions().device(torch::kCUDA).dtype(torch::kByte));
    FAIL() << "a 1 GiB tensor under a 256 MiB budget must fail";
  } catch (const std::exception& e) {
    EXPECT_TRUE(is_out_of_memory(e)) << e.what();
  }
  memory->set_budget(0);
}

// The probe's allocator calls must work in a process where no tensor has touched the GPU yet
// (the bench's fixed-batch scenario and a train run under --memory-budget start that way): the
// death test re-executes this binary for just this body, so CUDA starts uninitialised.
TEST(GpuMemoryProbe, WorksBeforeAnyCudaTensorExistsInTheProcess) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        auto memory = make_cuda_memory_probe(0);
        memory->set_budget(256 * kMiB);
        memory->reset_peak();
        const auto stats = memory->stats();
        memory.reset();  // restores the fraction in its destructor
        std::exit(stats.allocated_bytes == 0 ? 0 : 3);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(GpuJobProbe, ProbesTheCudaStepWithBf16) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  Config c;
  c.model.name = "resnet18";
  c.augment.image_size = 64;
  c.train.device = DeviceChoice::kCuda;
  c.train.precision = Precision::kBf16;
  auto memory = make_cuda_memory_probe(0);
  JobProbe job(c, 12, *memory);
  EXPECT_EQ(job.loader_batches_held(), 0);  // host buffers do not count on the device
  const auto small = job.run(4, 2);
  const auto large = job.run(32, 2);
  ASSERT_EQ(small.outcome, ProbeResult::Outcome::kRan) << small.error;
  ASSERT_EQ(large.outcome, ProbeResult::Outcome::kRan) << large.error;
  EXPECT_GT(large.peak_bytes, small.peak_bytes);
  EXPECT_GE(large.reserved_gap_bytes, 0);
}

}  // namespace
}  // namespace shoplens
