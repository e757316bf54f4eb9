#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/utils.h>
#include <torch/version.h>

#include <c10/util/Exception.h>

#include <new>
#include <string>

#include "shoplens/core/errors.h"
#include "shoplens/core/runtime.h"
#include "shoplens/core/torch_release.h"

namespace shoplens {

void set_compute_threads(int threads) { at::set_num_threads(resolve_threads(threads)); }

#ifndef SHOPLENS_TORCH_PACKAGE
#define SHOPLENS_TORCH_PACKAGE ""  // a build configured without src/CMakeLists.txt's definition
#endif

std::string torch_version() { return torch_release(TORCH_VERSION, SHOPLENS_TORCH_PACKAGE); }

std::string torch_release_description() { return describe_torch_release(TORCH_VERSION, SHOPLENS_TORCH_PACKAGE); }

bool cuda_available() { return torch::cuda::is_available(); }

bool wants_cuda(const std::string& device) { return device == "cuda" || (device == "auto" && cuda_available()); }
bool wants_cuda(DeviceChoice device) {
  return device == DeviceChoice::kCuda || (device == DeviceChoice::kAuto && cuda_available());
}

void seed_torch(std::uint64_t seed) { torch::manual_seed(seed); }

bool is_out_of_memory(const std::exception& e) {
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e) || dynamic_cast<const std::bad_alloc*>(&e) ||
      dynamic_cast<const OutOfMemoryError*>(&e))
    return true;
  // Some kernels report a failed allocation as a plain c10::Error.
  const std::string what = e.what();
  return what.find("out of memory") != std::string::npos || what.find("can't allocate memory") != std::string::npos;
}

std::string error_message(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) return c10_error->what_without_backtrace();
  return e.what();
}

}  // namespace shoplens
