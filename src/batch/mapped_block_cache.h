// The large blocks of the CPU budget allocator (cpu_memory_probe_torch.cpp): mapped from the
// kernel and, when freed, kept for reuse, as CUDA's caching allocator keeps device blocks, so a
// training step does not page-fault and zero its activations again every step.
//
// The bound: the mapped total (blocks in use + kept) never exceeds the high-water mark of the
// blocks in use since the last clear(). So the process holds no more than its live tensors' peak,
// as when every freed block is handed back (docs/FIND_BATCH.md, "The process").
//
// A request is served, in this order, by:
//   1. a kept block of its exact size;
//   2. a new mapping, when the kept blocks and it fit the bound (the kept ones wait for their size);
//   3. otherwise a kept block is recycled rather than unmapped whole: the smallest larger one loses
//      its tail (munmap), or the largest smaller one grows (mremap), so its pages that are already
//      faulted in serve again;
//   4. a new mapping after unmapping kept blocks, largest first, until the bound holds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

namespace shoplens {

class MappedBlockCache {
 public:
  static constexpr std::size_t kMappedFrom = std::size_t{1} << 20;
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer sees the heap's blocks, not these mappings: its builds keep the heap's.
  static constexpr bool kEnabled = false;
#else
  static constexpr bool kEnabled = true;
#endif

  // How the requests since construction were served.
  struct Counts {
    std::int64_t exact = 0;    // a kept block of the same size
    std::int64_t trimmed = 0;  // a larger kept block, its tail unmapped
    std::int64_t grown = 0;    // a smaller kept block, grown in place or moved by the kernel
    std::int64_t fresh = 0;    // a new mapping
  };

  MappedBlockCache() = default;
  MappedBlockCache(const MappedBlockCache&) = delete;
  MappedBlockCache& operator=(const MappedBlockCache&) = delete;
  ~MappedBlockCache();

  // A block of `size` bytes (a multiple of the page size), or nullptr when the kernel has none.
  void* acquire(std::size_t size);
  // Keeps a freed block for reuse, or unmaps it (`keep` false: no budget any more).
  void release(void* block, std::size_t size, bool keep);
  // Unmaps every kept block; the high-water mark starts again from the blocks in use.
  void clear();

  std::int64_t kept_bytes() const;
  std::int64_t mapped_bytes() const;  // in use + kept
  std::int64_t high_water() const;
  Counts counts() const;

 private:
  void* take_exact(std::size_t size);
  void* trim_larger(std::size_t size);
  void* grow_smaller(std::size_t size);
  void* pop_kept(std::map<std::size_t, std::vector<void*>>::iterator it);
  void unmap_kept_until(std::int64_t limit);
  std::int64_t room() const { return high_water_ - in_use_; }  // what the kept blocks may hold

  mutable std::mutex mutex_;
  std::map<std::size_t, std::vector<void*>> kept_;  // by size; no empty lists
  std::int64_t kept_bytes_ = 0;
  std::int64_t in_use_ = 0;
  std::int64_t high_water_ = 0;
  Counts counts_;
};

}  // namespace shoplens
