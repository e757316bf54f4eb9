#include "batch/mapped_block_cache.h"

#include <sys/mman.h>

#include <algorithm>
#include <iterator>

namespace shoplens {

MappedBlockCache::~MappedBlockCache() { unmap_kept_until(0); }

void* MappedBlockCache::acquire(std::size_t size) {
  std::lock_guard<std::mutex> lock(mutex_);
  in_use_ += static_cast<std::int64_t>(size);
  if (void* block = take_exact(size)) return block;
  high_water_ = std::max(high_water_, in_use_);
  if (kept_bytes_ > room()) {
    // Something kept has to go: recycle a block's faulted pages before unmapping whole ones.
    if (void* block = trim_larger(size)) return block;
    if (void* block = grow_smaller(size)) return block;
    unmap_kept_until(room());
  }
  void* block = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (block != MAP_FAILED) {
    ++counts_.fresh;
    return block;
  }
  in_use_ -= static_cast<std::int64_t>(size);
  return nullptr;
}

void MappedBlockCache::release(void* block, std::size_t size, bool keep) {
  std::lock_guard<std::mutex> lock(mutex_);
  in_use_ -= static_cast<std::int64_t>(size);
  if (!keep) {
    ::munmap(block, size);
    return;
  }
  kept_[size].push_back(block);
  kept_bytes_ += static_cast<std::int64_t>(size);
}

void MappedBlockCache::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  unmap_kept_until(0);
  high_water_ = in_use_;
}

std::int64_t MappedBlockCache::kept_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return kept_bytes_;
}

std::int64_t MappedBlockCache::mapped_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return in_use_ + kept_bytes_;
}

std::int64_t MappedBlockCache::high_water() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return high_water_;
}

MappedBlockCache::Counts MappedBlockCache::counts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counts_;
}

void* MappedBlockCache::pop_kept(std::map<std::size_t, std::vector<void*>>::iterator it) {
  void* block = it->second.back();
  kept_bytes_ -= static_cast<std::int64_t>(it->first);
  it->second.pop_back();
  if (it->second.empty()) kept_.erase(it);
  return block;
}

void* MappedBlockCache::take_exact(std::size_t size) {
  const auto it = kept_.find(size);
  if (it == kept_.end()) return nullptr;
  ++counts_.exact;
  return pop_kept(it);
}

// The smallest kept block larger than `size`, its tail handed back. The mapped total only falls.
void* MappedBlockCache::trim_larger(std::size_t size) {
  const auto it = kept_.upper_bound(size);
  if (it == kept_.end()) return nullptr;
  const std::size_t larger = it->first;
  void* block = pop_kept(it);
  ::munmap(static_cast<char*>(block) + size, larger - size);
  ++counts_.trimmed;
  return block;
}

// The largest kept block smaller than `size`, grown to it once the other kept blocks leave room.
void* MappedBlockCache::grow_smaller(std::size_t size) {
  auto it = kept_.lower_bound(size);
  if (it == kept_.begin()) return nullptr;
  --it;
  const std::size_t smaller = it->first;
  void* block = pop_kept(it);
  unmap_kept_until(room());
  void* grown = ::mremap(block, smaller, size, MREMAP_MAYMOVE);
  if (grown == MAP_FAILED) {
    ::munmap(block, smaller);
    return nullptr;
  }
  ++counts_.grown;
  return grown;
}

void MappedBlockCache::unmap_kept_until(std::int64_t limit) {
  while (kept_bytes_ > limit && !kept_.empty()) {
    const auto largest = std::prev(kept_.end());
    const std::size_t size = largest->first;
    ::munmap(pop_kept(largest), size);
  }
}

}  // namespace shoplens
