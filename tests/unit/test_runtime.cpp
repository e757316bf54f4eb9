// Process-level settings from core/runtime.h.
#include <gtest/gtest.h>

#include <malloc.h>
#include <stdlib.h>
#include <sys/resource.h>

#include <filesystem>
#include <string>
#include <vector>

#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/interrupt.h"
#include "shoplens/core/runtime.h"
#include "shoplens/core/torch_release.h"
#include "sanitizer.h"
#include "test_util.h"

namespace shoplens {
namespace {

TEST(Runtime, HostAllocatorTuningCanBeTurnedOffAndKeepsLargeBlocksInTheProcess) {
  SKIP_WHERE_PROCESS_MEMORY_IS_NOT_THE_PRODUCTS();
  ::setenv("SHOPLENS_MALLOC_TUNING", "0", 1);
  EXPECT_FALSE(tune_host_allocator());
  ::unsetenv("SHOPLENS_MALLOC_TUNING");
  ASSERT_TRUE(tune_host_allocator());
  // A 16 MiB block, freed and asked for again, now comes from the heap (glibc's default would
  // serve it with mmap and hand it back to the OS on free).
  const struct mallinfo2 before = mallinfo2();
  std::vector<char*> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(static_cast<char*>(std::malloc(16u << 20)));
  const struct mallinfo2 during = mallinfo2();
  for (auto* b : blocks) std::free(b);
  EXPECT_EQ(during.hblkhd, before.hblkhd) << "16 MiB blocks were mmapped despite the 32 MiB threshold";
  const struct mallinfo2 after = mallinfo2();
  EXPECT_GE(after.arena, during.arena) << "the heap was trimmed back to the OS";
}

// Debian's 1.13.1 package ships headers that say 1.13.0: the package's version is the release.
TEST(Runtime, TorchReleaseIsThePackagesWhenItsHeadersLagBehind) {
  EXPECT_EQ(torch_release("1.13.0", "libtorch1.13 1.13.1+dfsg-4"), "1.13.1");
  EXPECT_EQ(torch_release("1.13.0", "libtorch1.13 2:1.13.1-1~bpo12+1"), "1.13.1");
  EXPECT_EQ(torch_release("2.11.0", ""), "2.11.0");                            // pip: no package, headers right
  EXPECT_EQ(torch_release("2.11.0", "libtorch1.13 1.13.1+dfsg-4"), "2.11.0");  // another install's package
  const std::string told = describe_torch_release("1.13.0", "libtorch1.13 1.13.1+dfsg-4");
  EXPECT_EQ(told.rfind("1.13.1 ", 0), 0u) << told;
  EXPECT_NE(told.find("libtorch1.13 1.13.1+dfsg-4"), std::string::npos) << told;
  EXPECT_NE(told.find("1.13.0"), std::string::npos) << told;
  EXPECT_EQ(describe_torch_release("1.13.1", "libtorch1.13 1.13.1+dfsg-4"), "1.13.1");
}

TEST(Runtime, OmpNumThreadsSetsTheDefaultThreadCount) {
  ::setenv("OMP_NUM_THREADS", "3", 1);
  EXPECT_EQ(resolve_threads(0), 3);
  EXPECT_EQ(resolve_threads(5), 5);  // an explicit setting wins
  ::unsetenv("OMP_NUM_THREADS");
  EXPECT_EQ(resolve_threads(0), usable_cores());
}

}  // namespace
TEST(Runtime, PassiveOpenMpIsOnlyForAGemmBoundModelOnSeveralThreads) {
  // One thread or a convolutional model: nothing to change, the call returns.
  prefer_passive_openmp(true, 1, "text_tiny");
  prefer_passive_openmp(false, 8, "resnet18");
}

}  // namespace shoplens

namespace shoplens {
namespace {

// Past `ulimit -f` the process was killed by SIGXFSZ (exit 153) with its temporary file left.
TEST(Runtime, FileSizeLimitIsAnIoErrorAndLeavesNoTemporaryFile) {
  testing::ScratchDir dir("fsize");
  install_interrupt_handlers();
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  rlimit small = saved;
  small.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string error;
  try {
    write_file_atomic(dir / "big.bin", std::string(1 << 20, 'x'));
  } catch (const IoError& e) {
    error = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &saved);
  EXPECT_NE(error.find("big.bin"), std::string::npos) << error;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    ADD_FAILURE() << "left behind: " << entry.path();
}

}  // namespace
}  // namespace shoplens
