// The CPU budget allocator's large blocks (src/batch/mapped_block_cache.h): kept blocks serve
// requests of their size, are trimmed or grown rather than unmapped when the bound needs room,
// and the mapped total never passes the high-water mark of the blocks in use.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "batch/mapped_block_cache.h"

namespace shoplens {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

void fill(void* block, std::size_t size, unsigned char value) { std::memset(block, value, size); }

// Every byte of the block holds `value`.
bool holds(const void* block, std::size_t size, unsigned char value) {
  const auto* bytes = static_cast<const unsigned char*>(block);
  for (std::size_t i = 0; i < size; ++i)
    if (bytes[i] != value) return false;
  return true;
}

TEST(MappedBlockCache, AFreedBlockServesTheNextRequestOfItsSize) {
  MappedBlockCache cache;
  void* block = cache.acquire(2 * kMiB);
  ASSERT_NE(block, nullptr);
  cache.release(block, 2 * kMiB, true);
  EXPECT_EQ(cache.kept_bytes(), std::int64_t(2 * kMiB));
  EXPECT_EQ(cache.acquire(2 * kMiB), block);
  EXPECT_EQ(cache.counts().exact, 1);
  EXPECT_EQ(cache.kept_bytes(), 0);
  cache.release(block, 2 * kMiB, false);  // no budget any more: unmapped
  EXPECT_EQ(cache.mapped_bytes(), 0);
}

TEST(MappedBlockCache, ASmallerRequestTakesTheHeadOfALargerKeptBlock) {
  MappedBlockCache cache;
  void* block = cache.acquire(4 * kMiB);
  fill(block, 4 * kMiB, 7);
  cache.release(block, 4 * kMiB, true);
  void* head = cache.acquire(3 * kMiB);
  EXPECT_EQ(head, block);
  EXPECT_TRUE(holds(head, 3 * kMiB, 7));  // the same pages, already faulted in
  EXPECT_EQ(cache.counts().trimmed, 1);
  EXPECT_EQ(cache.mapped_bytes(), std::int64_t(3 * kMiB));  // the tail went back
  fill(head, 3 * kMiB, 1);
  cache.release(head, 3 * kMiB, true);
  EXPECT_EQ(cache.acquire(3 * kMiB), head);  // kept at its new size
}

TEST(MappedBlockCache, ALargerRequestGrowsASmallerKeptBlockWhenTheBoundNeedsRoom) {
  MappedBlockCache cache;
  void* a = cache.acquire(2 * kMiB);
  void* b = cache.acquire(2 * kMiB);
  fill(a, 2 * kMiB, 3);
  fill(b, 2 * kMiB, 3);
  cache.release(a, 2 * kMiB, true);
  cache.release(b, 2 * kMiB, true);
  // High water 4 MiB: 3 MiB more would need 7 mapped, so one kept block grows and the other goes.
  void* grown = cache.acquire(3 * kMiB);
  ASSERT_NE(grown, nullptr);
  EXPECT_EQ(cache.counts().grown, 1);
  EXPECT_TRUE(holds(grown, 2 * kMiB, 3));  // its first pages are the kept block's
  fill(grown, 3 * kMiB, 9);                // and all of it is writable
  EXPECT_EQ(cache.mapped_bytes(), std::int64_t(3 * kMiB));
  EXPECT_EQ(cache.kept_bytes(), 0);
  cache.release(grown, 3 * kMiB, true);
}

TEST(MappedBlockCache, KeptBlocksWaitForTheirSizeWhileTheBoundHasRoom) {
  MappedBlockCache cache;
  void* big = cache.acquire(4 * kMiB);
  void* small = cache.acquire(kMiB);
  cache.release(small, kMiB, true);
  cache.release(big, 4 * kMiB, true);
  // 5 MiB high water, 5 MiB kept: a 2 MiB request needs room, and trims the 4 MiB block.
  void* mid = cache.acquire(2 * kMiB);
  EXPECT_EQ(mid, big);
  EXPECT_EQ(cache.counts().trimmed, 1);
  // Now 3 MiB mapped (2 in use, 1 kept) under a 5 MiB mark: a new 2 MiB block fits beside them.
  void* other = cache.acquire(2 * kMiB);
  EXPECT_EQ(cache.counts().fresh, 3);
  EXPECT_EQ(cache.kept_bytes(), std::int64_t(kMiB));
  cache.release(mid, 2 * kMiB, true);
  cache.release(other, 2 * kMiB, true);
  cache.clear();
  EXPECT_EQ(cache.mapped_bytes(), 0);
  EXPECT_EQ(cache.high_water(), 0);
}

TEST(MappedBlockCache, TheMappedTotalNeverPassesTheHighWaterMarkOfBlocksInUse) {
  MappedBlockCache cache;
  std::mt19937 rng(5);
  std::vector<std::pair<void*, std::size_t>> live;
  std::int64_t in_use = 0, peak = 0;
  for (int op = 0; op < 600; ++op) {
    if (live.size() < 6 && (live.empty() || rng() % 3 != 0)) {
      const std::size_t size = (1 + rng() % 8) * kMiB / 2;
      void* block = cache.acquire(size);
      ASSERT_NE(block, nullptr);
      fill(block, size, static_cast<unsigned char>(op));
      live.emplace_back(block, size);
      in_use += static_cast<std::int64_t>(size);
      peak = std::max(peak, in_use);
    } else {
      const std::size_t i = rng() % live.size();
      cache.release(live[i].first, live[i].second, true);
      in_use -= static_cast<std::int64_t>(live[i].second);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    }
    ASSERT_LE(cache.mapped_bytes(), cache.high_water()) << "after operation " << op;
    ASSERT_EQ(cache.high_water(), peak) << "after operation " << op;
  }
  const auto counts = cache.counts();
  EXPECT_GT(counts.exact + counts.trimmed + counts.grown, counts.fresh);  // mostly reuse
  for (const auto& [block, size] : live) cache.release(block, size, true);
  cache.clear();
  EXPECT_EQ(cache.mapped_bytes(), 0);
}

// The allocator is called from the loader's, OpenMP's and the training thread at once: no block is
// handed to two owners, so what each thread writes is what it reads back.
TEST(MappedBlockCache, ThreadsNeverShareABlock) {
  MappedBlockCache cache;
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<std::thread> threads;
  std::vector<int> corrupted(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&cache, &corrupted, page, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      for (int i = 0; i < 4000; ++i) {
        const std::size_t size = (1 + rng() % 4) * page;  // small: the threads meet in the cache often
        void* block = cache.acquire(size);
        if (block == nullptr) {
          ++corrupted[static_cast<std::size_t>(t)];
          continue;
        }
        const auto mark = static_cast<unsigned char>(16 * t + i % 16);
        fill(block, size, mark);
        std::this_thread::yield();
        corrupted[static_cast<std::size_t>(t)] += !holds(block, size, mark);
        cache.release(block, size, true);
      }
    });
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(corrupted, std::vector<int>(4, 0));
  EXPECT_LE(cache.mapped_bytes(), cache.high_water());
  cache.clear();
  EXPECT_EQ(cache.mapped_bytes(), 0);
}

}  // namespace
}  // namespace shoplens
