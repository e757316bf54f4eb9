// core/process_memory.h: the job's resident peak, net of the program's own footprint and of
// file pages mapped meanwhile.
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <cstring>
#include <vector>

#include "shoplens/core/process_memory.h"
#include "sanitizer.h"
#include "test_util.h"

namespace shoplens {
namespace {

constexpr std::int64_t kMiB = 1024 * 1024;

TEST(ProcessMemory, ReadsTheKernelsFigures) {
  const ResidentMemory m = read_resident_memory();
  EXPECT_GT(m.resident, 0);
  EXPECT_GE(m.peak, m.resident);
  EXPECT_GT(m.file_backed, 0);  // the test binary and its libraries
}

TEST(ProcessMemory, TheJobsPeakCountsWhatItTouchedAndOnlySinceTheReset) {
  SKIP_WHERE_PROCESS_MEMORY_IS_NOT_THE_PRODUCTS();
  if (!reset_resident_peak()) GTEST_SKIP() << "this kernel refuses /proc/self/clear_refs";
  const ProgramFootprint program = measure_program_footprint(0);
  ASSERT_TRUE(reset_resident_peak());
  {
    std::vector<char> block(96 * kMiB);
    std::memset(block.data(), 1, block.size());  // resident only once touched
    EXPECT_GE(job_resident_peak(program), 90 * kMiB);
  }
  release_free_heap();
  ASSERT_TRUE(reset_resident_peak());
  EXPECT_LT(job_resident_peak(program), 48 * kMiB);  // the block is gone and the peak restarted
}

TEST(ProcessMemory, MappedFilePagesAreNotTheJobs) {
  if (!reset_resident_peak()) GTEST_SKIP() << "this kernel refuses /proc/self/clear_refs";
  testing::ScratchDir dir;
  const auto path = dir / "shard.bin";
  testing::write_text(path, std::string(64 * kMiB, 'x'));
  const ProgramFootprint program = measure_program_footprint(0);
  ASSERT_TRUE(reset_resident_peak());
  FILE* f = std::fopen(path.c_str(), "rb");
  ASSERT_NE(f, nullptr);
  void* map = ::mmap(nullptr, 64 * kMiB, PROT_READ, MAP_PRIVATE, fileno(f), 0);
  ASSERT_NE(map, MAP_FAILED);
  std::int64_t sum = 0;
  for (std::int64_t i = 0; i < 64 * kMiB; i += 4096)
    sum += static_cast<const char*>(map)[i];  // a loader reading shards
  EXPECT_GT(sum, 0);
  EXPECT_GE(read_resident_memory().peak - program.resident, 60 * kMiB);  // the raw peak sees the pages
  EXPECT_LT(job_resident_peak(program), 32 * kMiB);                      // the job's does not
  ::munmap(map, 64 * kMiB);
  std::fclose(f);
}

}  // namespace
}  // namespace shoplens
