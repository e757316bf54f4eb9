#include "shoplens/dist/cuda_device.h"

#include <spdlog/spdlog.h>

#include "shoplens/core/errors.h"

#ifdef SHOPLENS_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace shoplens {

int cuda_device_for(int local_rank, int visible_devices) {
  if (visible_devices <= 0 || local_rank < 0) return 0;
  return local_rank % visible_devices;
}

void bind_cuda_device(const DistEnv& env) {
#ifdef SHOPLENS_WITH_CUDA
  const int visible = static_cast<int>(c10::cuda::device_count());
  if (visible <= 0) return;
  const int device = cuda_device_for(env.local_rank, visible);
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(device));
  if (env.distributed()) spdlog::info("dist: {} uses cuda:{} ({} visible)", env.describe(), device, visible);
#else
  (void)env;
  throw ConfigError("this shoplens was built against a LibTorch without CUDA; use train.device=cpu");
#endif
}

}  // namespace shoplens
