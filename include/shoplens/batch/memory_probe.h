// What the batch finder and the trainer ask of a device's memory, behind one narrow interface:
// peaks since a reset, the allocator's cache and fragmentation, and a budget that makes the
// allocator refuse (with LibTorch's own out-of-memory error) beyond a given size. On CPU the
// budget is enforced by a tracking allocator installed as LibTorch's CPU allocator; on CUDA by
// the caching allocator's memory fraction (standing in for a smaller card on a bigger one).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace shoplens {

struct MemoryStats {
  std::int64_t allocated_bytes = 0;       // live tensors now
  std::int64_t peak_allocated_bytes = 0;  // since the last reset_peak()
  std::int64_t reserved_bytes = 0;        // held by the allocator: live + cached blocks (CUDA's cache,
                                          // CPU: large blocks kept for reuse under a budget)
  std::int64_t peak_reserved_bytes = 0;
  std::int64_t inactive_split_bytes = 0;     // CUDA: cached blocks split and unusable (fragmentation)
  std::int64_t alloc_retries = 0;            // CUDA: allocations that first had to free the cache
  std::int64_t refused_allocations = 0;      // allocations refused by the budget or the device
  std::int64_t last_refused_need_bytes = 0;  // live + request at the last refusal: what was needed
};

class MemoryProbe {
 public:
  virtual ~MemoryProbe() = default;
  virtual std::string device_name() const = 0;
  virtual std::int64_t device_total_bytes() const = 0;
  virtual std::int64_t device_free_bytes() const = 0;
  // 0 removes the cap. The previous cap comes back when the probe is destroyed.
  virtual void set_budget(std::int64_t bytes) = 0;
  virtual std::int64_t budget() const = 0;
  virtual void reset_peak() = 0;
  // Returns cached blocks to the device (CUDA) or the OS (CPU: the budget allocator's kept blocks).
  virtual void release_cached() = 0;
  virtual MemoryStats stats() const = 0;
};

// Installs the tracking allocator on first use (it then serves every later CPU allocation).
std::unique_ptr<MemoryProbe> make_cpu_memory_probe();
// ConfigError when this build has no CUDA. device -1: the current device (dist/cuda_device.h
// binds it per local rank).
std::unique_ptr<MemoryProbe> make_cuda_memory_probe(int device = -1);
std::unique_ptr<MemoryProbe> make_memory_probe(bool cuda);

}  // namespace shoplens
