// The CPU side of the memory probe: a tracking allocator installed as LibTorch's CPU allocator.
// It counts live and peak bytes exactly and refuses beyond a budget with c10::OutOfMemoryError,
// which makes the batch search and OOM recovery real and testable on machines without a GPU.
// Under a budget it also keeps large freed blocks for reuse, within the live peak
// (mapped_block_cache.h).
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <new>
#include <string>

#include "batch/mapped_block_cache.h"
#include "shoplens/batch/memory_probe.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/runtime.h"
#include "shoplens/core/strings.h"
#include "torch_compat.h"

namespace shoplens {
namespace {

class BudgetCpuAllocator final : public c10::Allocator {
 public:
  // The sizes live in a header before the data: LibTorch requires the DataPtr's context to be
  // the data pointer itself, so there is no separate bookkeeping object to hang them on.
  static constexpr std::size_t kHeader = 64;  // keeps c10's 64-byte alignment for the data
  struct Header {
    std::size_t bytes;   // what was asked for: the budget's count
    std::size_t mapped;  // the mapping's size, 0 for a heap block
  };

  static BudgetCpuAllocator& instance() {
    // Never destroyed: tensors freed during static destruction still call our deleter.
    static auto* allocator = [] {
      auto* a = new BudgetCpuAllocator();
      c10::SetCPUAllocator(a, /*priority=*/100);
      return a;
    }();
    return *allocator;
  }

  c10::DataPtr allocate(std::size_t n) SHOPLENS_ALLOCATE_CONST override {
    auto& self = const_cast<BudgetCpuAllocator&>(*this);
    const auto size = static_cast<std::int64_t>(n);
    const std::int64_t live = self.live_.fetch_add(size) + size;
    const std::int64_t budget = self.budget_.load();
    if (budget > 0 && live > budget) {
      self.refuse(size, live);
      TORCH_CHECK_WITH(OutOfMemoryError, false, "CPU memory budget exceeded: tried to allocate ", format_bytes(size),
                       " with ", format_bytes(live - size), " in use and a budget of ", format_bytes(budget));
    }
    std::int64_t peak = self.peak_.load();
    while (live > peak && !self.peak_.compare_exchange_weak(peak, live)) {}
    void* base = self.allocate_block(n, budget > 0);
    if (base == nullptr) {
      self.refuse(size, live);
      TORCH_CHECK_WITH(OutOfMemoryError, false, "CPU allocation of ", format_bytes(size),
                       " failed (system out of memory)");
    }
    void* data = static_cast<char*>(base) + kHeader;
    return {data, data, &release, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  SHOPLENS_ALLOCATOR_COPY_DATA

  static void release(void* data) {
    if (!data) return;
    auto& self = instance();
    void* base = static_cast<char*>(data) - kHeader;
    const Header header = *static_cast<Header*>(base);
    self.live_.fetch_sub(static_cast<std::int64_t>(header.bytes));
    if (header.mapped > 0)
      self.mapped_.release(base, header.mapped, /*keep=*/self.budget_.load() > 0);
    else
      std::free(base);
  }

  void refuse(std::int64_t size, std::int64_t live) {
    live_.fetch_sub(size);
    refused_++;
    last_refused_need_ = live;
  }

  // Header and data: a kept or new mapping for a large block under a budget, else the heap's.
  void* allocate_block(std::size_t n, bool under_budget) {
    static const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    void* base = nullptr;
    std::size_t mapped = 0;
    if (MappedBlockCache::kEnabled && under_budget && n >= MappedBlockCache::kMappedFrom) {
      mapped = (n + kHeader + page - 1) / page * page;
      base = mapped_.acquire(mapped);
    } else if (posix_memalign(&base, kHeader, n + kHeader) != 0) {
      base = nullptr;
    }
    if (base != nullptr) *static_cast<Header*>(base) = {n, mapped};
    return base;
  }

  std::atomic<std::int64_t> live_{0};
  std::atomic<std::int64_t> peak_{0};
  std::atomic<std::int64_t> budget_{0};
  std::atomic<std::int64_t> refused_{0};
  std::atomic<std::int64_t> last_refused_need_{0};
  MappedBlockCache mapped_;
};

std::int64_t meminfo_bytes(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  std::string name, unit;
  std::int64_t kib = 0;
  while (in >> name >> kib >> unit)
    if (name == key + ":") return kib * 1024;
  return 0;
}

class CpuMemoryProbe final : public MemoryProbe {
 public:
  CpuMemoryProbe() : allocator_(BudgetCpuAllocator::instance()), previous_budget_(allocator_.budget_.load()) {}
  ~CpuMemoryProbe() override { store_budget(previous_budget_); }

  std::string device_name() const override { return "cpu (" + cpu_model() + ")"; }
  std::int64_t device_total_bytes() const override { return meminfo_bytes("MemTotal"); }
  std::int64_t device_free_bytes() const override { return meminfo_bytes("MemAvailable"); }
  void set_budget(std::int64_t bytes) override {
    store_budget(bytes);
    // A CPU budget covers the process (find_batch.process_check measures it): the heap must give
    // back what the tensors free, or fragmentation decides the process's size (core/runtime.h).
    if (bytes > 0) bound_host_allocator();
  }
  std::int64_t budget() const override { return allocator_.budget_.load(); }
  void reset_peak() override { allocator_.peak_.store(allocator_.live_.load()); }
  void release_cached() override { allocator_.mapped_.clear(); }
  MemoryStats stats() const override {
    MemoryStats s;
    s.allocated_bytes = allocator_.live_.load();
    s.reserved_bytes = s.allocated_bytes + allocator_.mapped_.kept_bytes();
    s.peak_allocated_bytes = s.peak_reserved_bytes = allocator_.peak_.load();
    s.refused_allocations = allocator_.refused_.load();
    s.last_refused_need_bytes = allocator_.last_refused_need_.load();
    return s;
  }

 private:
  // Blocks are kept mapped for reuse only under a budget: without one they go back now.
  void store_budget(std::int64_t bytes) {
    allocator_.budget_.store(bytes > 0 ? bytes : 0);
    if (bytes <= 0) allocator_.mapped_.clear();
  }

  BudgetCpuAllocator& allocator_;
  std::int64_t previous_budget_;
};

}  // namespace

std::unique_ptr<MemoryProbe> make_cpu_memory_probe() { return std::make_unique<CpuMemoryProbe>(); }

std::unique_ptr<MemoryProbe> make_memory_probe(bool cuda) {
  return cuda ? make_cuda_memory_probe() : make_cpu_memory_probe();
}

}  // namespace shoplens
