// Which GPU a rank of a data-parallel job uses. Every CUDA tensor of ShopLens is made on the
// current device, so binding the process's current device once, before any CUDA work, routes the
// model, the steps, the memory probe and NCCL's communicators to it.
#pragma once

#include "shoplens/dist/dist_env.h"

namespace shoplens {

// local_rank mod the visible devices: one GPU per local rank under torchrun or `shoplens launch`,
// and device 0 for every rank where the scheduler shows each task one GPU (Slurm's GPU binding,
// CUDA_VISIBLE_DEVICES per task). 0 when no device is visible.
int cuda_device_for(int local_rank, int visible_devices);

// Makes cuda_device_for(env.local_rank, visible) this process's current CUDA device and logs it.
// ConfigError on a build without CUDA; a no-op when CUDA shows no device.
void bind_cuda_device(const DistEnv& env);

}  // namespace shoplens
