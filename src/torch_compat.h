// Every difference between Debian's LibTorch 1.13 and the 2.x of the GPU machines, in one
// place (docs/GPU.md). Include only from *_torch.cpp files.
#pragma once

#include <ATen/ATen.h>
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
  if (cuda)
    at::autocast::set_enabled(on);
  else
    at::autocast::set_cpu_enabled(on);
}
inline void set_autocast_dtype(bool cuda, at::ScalarType t) {
  if (cuda)
    at::autocast::set_autocast_gpu_dtype(t);
  else
    at::autocast::set_autocast_cpu_dtype(t);
}
#endif

// ---- CUDA's lazy initialisation: the caching allocator's statistics, peak reset and memory
// fraction throw ("Invalid device argument", "Allocator not initialized") until something has
// initialised CUDA in this process; a tensor op does it implicitly, allocator calls do not.
inline void init_cuda_lazily() {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5)
  at::globalContext().lazyInitDevice(at::kCUDA);
#else
  at::globalContext().lazyInitCUDA();
#endif
}

// ---- attention: the fused kernel (flash / memory-efficient / math by device and dtype) is public
// from 2.0; 1.13 has only the private math composite. `attend` is a bool mask, true = may attend.
inline constexpr bool kFusedAttentionIsDefault = TORCH_VERSION_MAJOR >= 2;
inline at::Tensor scaled_dot_product_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                               const at::Tensor& attend) {
#if TORCH_VERSION_MAJOR >= 2
  return at::scaled_dot_product_attention(q, k, v, attend, 0.0, false);
#else
  return std::get<0>(at::_scaled_dot_product_attention(q, k, v, attend, 0.0, false, false));
#endif
}

// ---- c10::Allocator: allocate() lost its const in 2.3, and copy_data() became required ----
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define SHOPLENS_ALLOCATE_CONST
#define SHOPLENS_ALLOCATOR_COPY_DATA \
  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }
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

// ---- c10d::TCPStore: 2.2+ serves through libuv by default and refuses where LibTorch was built
// without it (Debian trixie's 2.6: "use_libuv was requested but PyTorch was build without libuv
// support"). USE_LIBUV=0, torchrun's switch, asks for the socket server; otherwise libuv is tried
// first and the socket server is taken where this LibTorch lacks libuv. ----
#include <cstdlib>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
namespace shoplens::compat {
inline bool store_wants_libuv() {
  const char* flag = std::getenv("USE_LIBUV");
  return !(flag && std::string(flag) == "0");
}
inline c10::intrusive_ptr<::c10d::Store> make_tcp_store(const std::string& host, ::c10d::TCPStoreOptions options) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 2)
  if (store_wants_libuv()) {
    options.useLibUV = true;
    try {
      return c10::make_intrusive<::c10d::TCPStore>(host, options);
    } catch (const std::exception& e) {
      if (std::string(e.what()).find("libuv") == std::string::npos) throw;
    }
  }
  options.useLibUV = false;
#endif
  return c10::make_intrusive<::c10d::TCPStore>(host, options);
}
}  // namespace shoplens::compat
#endif
