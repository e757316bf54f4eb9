#include <torch/cuda.h>
#include <torch/version.h>

#include "shoplens/core/runtime.h"

namespace shoplens {

void set_compute_threads(int threads) {
  at::set_num_threads(resolve_threads(threads));
}

std::string torch_version() { return TORCH_VERSION; }

bool cuda_available() { return torch::cuda::is_available(); }

void seed_torch(std::uint64_t seed) { torch::manual_seed(seed); }

}  // namespace shoplens
