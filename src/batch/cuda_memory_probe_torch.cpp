// The CUDA side of the memory probe: the caching allocator's statistics and memory fraction.
// Compiled only against a CUDA LibTorch (SHOPLENS_WITH_CUDA, set by CMake when c10_cuda exists).
#include "shoplens/batch/memory_probe.h"
#include "shoplens/core/errors.h"
#include "torch_compat.h"

#ifdef SHOPLENS_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>

#include <algorithm>

namespace shoplens {
namespace {

class CudaMemoryProbe final : public MemoryProbe {
 public:
  explicit CudaMemoryProbe(int device) : device_(device) {
    // The probe's first call may come before any tensor of the process touches the GPU.
    compat::init_cuda_lazily();
    if (device_ < 0) device_ = static_cast<int>(c10::cuda::current_device());
    c10::cuda::set_device(static_cast<c10::DeviceIndex>(device_));
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, device_);
    name_ = std::string("cuda:") + std::to_string(device_) + " (" + prop.name + ")";
    total_ = static_cast<std::int64_t>(prop.totalGlobalMem);
  }
  ~CudaMemoryProbe() override {
    try {
      if (budget_ > 0) c10::cuda::CUDACachingAllocator::setMemoryFraction(1.0, device_);
    } catch (const std::exception&) {  // a destructor must not throw: the fraction dies with the process anyway
    }
  }
  std::string device_name() const override { return name_; }
  std::int64_t device_total_bytes() const override { return total_; }
  std::int64_t device_free_bytes() const override {
    std::size_t free = 0, total = 0;
    cudaMemGetInfo(&free, &total);
    return static_cast<std::int64_t>(free);
  }
  void set_budget(std::int64_t bytes) override {
    budget_ = bytes > 0 ? bytes : 0;
    const double fraction = budget_ > 0 ? std::min(1.0, static_cast<double>(budget_) / total_) : 1.0;
    c10::cuda::CUDACachingAllocator::setMemoryFraction(fraction, device_);
  }
  std::int64_t budget() const override { return budget_; }
  void reset_peak() override { c10::cuda::CUDACachingAllocator::resetPeakStats(device_); }
  void release_cached() override { c10::cuda::CUDACachingAllocator::emptyCache(); }
  MemoryStats stats() const override {
    const auto d = c10::cuda::CUDACachingAllocator::getDeviceStats(device_);
    constexpr std::size_t kAggregate = 0;  // StatType::AGGREGATE in every version
    MemoryStats s;
    s.allocated_bytes = d.allocated_bytes[kAggregate].current;
    s.peak_allocated_bytes = d.allocated_bytes[kAggregate].peak;
    s.reserved_bytes = d.reserved_bytes[kAggregate].current;
    s.peak_reserved_bytes = d.reserved_bytes[kAggregate].peak;
    s.inactive_split_bytes = d.inactive_split_bytes[kAggregate].current;
    s.alloc_retries = d.num_alloc_retries;
    s.refused_allocations = d.num_ooms;
    return s;
  }

 private:
  int device_;
  std::string name_;
  std::int64_t total_ = 0;
  std::int64_t budget_ = 0;
};

}  // namespace

std::unique_ptr<MemoryProbe> make_cuda_memory_probe(int device) { return std::make_unique<CudaMemoryProbe>(device); }

}  // namespace shoplens

#else

namespace shoplens {
std::unique_ptr<MemoryProbe> make_cuda_memory_probe(int) {
  throw ConfigError("this shoplens was built against a LibTorch without CUDA; use train.device=cpu");
}
}  // namespace shoplens

#endif
