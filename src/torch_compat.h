// Every difference between Debian's LibTorch 1.13 and the 2.x of the GPU machines, in one
// place (see ../shared/GPU.md). Include only from *_torch.cpp files.
#pragma once

#include <ATen/autocast_mode.h>
#include <c10/core/Allocator.h>
#include <torch/version.h>

namespace shoplens::compat {

// ---- autocast ----
#if TORCH_VERSION_MAJOR >= 2
inline bool autocast_enabled(bool cuda) { return at::autocast::is_autocast_enabled(cuda ? at::kCUDA : at::kCPU); }
inline void set_autocast(bool cuda, bool on) { at::autocast::set_autocast_enabled(cuda ? at::kCUDA : at::kCPU, on); }
inline void set_autocast_dtype(bool cuda, at::ScalarType t) {
  at::autocast::set_autocast_dtype(cuda ? at::kCUDA : at::kCPU, t);
}
#else
inline bool autocast_enabled(bool cuda) { return cuda ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled(); }
inline void set_autocast(bool cuda, bool on) {
  if (cuda) at::autocast::set_enabled(on);
  else at::autocast::set_cpu_enabled(on);
}
inline void set_autocast_dtype(bool cuda, at::ScalarType t) {
  if (cuda) at::autocast::set_autocast_gpu_dtype(t);
  else at::autocast::set_autocast_cpu_dtype(t);
}
#endif

// ---- c10::Allocator: allocate() lost its const in 2.3, and copy_data() became required ----
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define SHOPLENS_ALLOCATE_CONST
#define SHOPLENS_ALLOCATOR_COPY_DATA                                                  \
  void copy_data(void* dest, const void* src, std::size_t count) const override { \
    default_copy_data(dest, src, count);                                              \
  }
#else
#define SHOPLENS_ALLOCATE_CONST const
#define SHOPLENS_ALLOCATOR_COPY_DATA
#endif

}  // namespace shoplens::compat

// ---- c10d: ProcessGroupGloo/NCCL derive from ProcessGroup in 1.13 and from Backend in 2.x ----
// Only the dist files ask for it (the c10d headers are heavy).
#ifdef SHOPLENS_COMPAT_C10D
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
namespace shoplens::compat {
using DistBackend = ::c10d::Backend;
}
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
namespace shoplens::compat {
using DistBackend = ::c10d::ProcessGroup;
}
#endif
#endif
