// The CPU side of the memory probe: a tracking allocator installed as LibTorch's CPU allocator.
// It counts live and peak bytes exactly and refuses beyond a budget with c10::OutOfMemoryError,
// which makes the batch search and OOM recovery real and testable on machines without a GPU.
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <new>
#include <string>

#include "shoplens/batch/memory_probe.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/runtime.h"
#include "shoplens/core/strings.h"
#include "torch_compat.h"

namespace shoplens {
namespace {

class BudgetCpuAllocator final : public c10::Allocator {
 public:
  // The size lives in a header before the data: LibTorch requires the DataPtr's context to be
  // the data pointer itself, so there is no separate bookkeeping object to hang it on.
  static constexpr std::size_t kHeader = 64;  // keeps c10's 64-byte alignment for the data

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
      self.live_.fetch_sub(size);
      self.refused_++;
      self.last_refused_need_ = live;
      TORCH_CHECK_WITH(OutOfMemoryError, false, "CPU memory budget exceeded: tried to allocate ", format_bytes(size),
                       " with ", format_bytes(live - size), " in use and a budget of ", format_bytes(budget));
    }
    std::int64_t peak = self.peak_.load();
    while (live > peak && !self.peak_.compare_exchange_weak(peak, live)) {}
    void* base = nullptr;
    if (posix_memalign(&base, kHeader, n + kHeader) != 0 || base == nullptr) {
      self.live_.fetch_sub(size);
      self.refused_++;
      self.last_refused_need_ = live;
      TORCH_CHECK_WITH(OutOfMemoryError, false, "CPU allocation of ", format_bytes(size),
                       " failed (system out of memory)");
    }
    *static_cast<std::size_t*>(base) = n;
    void* data = static_cast<char*>(base) + kHeader;
    return {data, data, &release, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  SHOPLENS_ALLOCATOR_COPY_DATA

  static void release(void* data) {
    if (!data) return;
    void* base = static_cast<char*>(data) - kHeader;
    instance().live_.fetch_sub(static_cast<std::int64_t>(*static_cast<std::size_t*>(base)));
    std::free(base);
  }

  std::atomic<std::int64_t> live_{0};
  std::atomic<std::int64_t> peak_{0};
  std::atomic<std::int64_t> budget_{0};
  std::atomic<std::int64_t> refused_{0};
  std::atomic<std::int64_t> last_refused_need_{0};
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
  ~CpuMemoryProbe() override { allocator_.budget_.store(previous_budget_); }

  std::string device_name() const override { return "cpu (" + cpu_model() + ")"; }
  std::int64_t device_total_bytes() const override { return meminfo_bytes("MemTotal"); }
  std::int64_t device_free_bytes() const override { return meminfo_bytes("MemAvailable"); }
  void set_budget(std::int64_t bytes) override {
    allocator_.budget_.store(bytes > 0 ? bytes : 0);
    // A CPU budget covers the process (find_batch.process_check measures it): the heap must give
    // back what the tensors free, or fragmentation decides the process's size (core/runtime.h).
    if (bytes > 0) bound_host_allocator();
  }
  std::int64_t budget() const override { return allocator_.budget_.load(); }
  void reset_peak() override { allocator_.peak_.store(allocator_.live_.load()); }
  void release_cached() override {}
  MemoryStats stats() const override {
    MemoryStats s;
    s.allocated_bytes = s.reserved_bytes = allocator_.live_.load();
    s.peak_allocated_bytes = s.peak_reserved_bytes = allocator_.peak_.load();
    s.refused_allocations = allocator_.refused_.load();
    s.last_refused_need_bytes = allocator_.last_refused_need_.load();
    return s;
  }

 private:
  BudgetCpuAllocator& allocator_;
  std::int64_t previous_budget_;
};

}  // namespace

std::unique_ptr<MemoryProbe> make_cpu_memory_probe() { return std::make_unique<CpuMemoryProbe>(); }

std::unique_ptr<MemoryProbe> make_memory_probe(bool cuda) {
  return cuda ? make_cuda_memory_probe() : make_cpu_memory_probe();
}

}  // namespace shoplens
