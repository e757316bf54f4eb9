// The dist layer's section of the run configuration: data-parallel training (docs/DISTRIBUTED.md).
// The process group itself comes from the environment (torchrun's or Slurm's variables); these
// tune it. Schema rows: src/core/config.cpp.
#pragma once

#include "shoplens/core/enum_names.h"

namespace shoplens {

enum class DistBackend { kAuto, kGloo, kNccl };  // auto: nccl on CUDA, else gloo
inline constexpr EnumName<DistBackend> kDistBackendNames[] = {
    {DistBackend::kAuto, "auto"}, {DistBackend::kGloo, "gloo"}, {DistBackend::kNccl, "nccl"}};

struct DistConfig {
  DistBackend backend = DistBackend::kAuto;
  double timeout_seconds = 300;   // rendezvous and collectives: a dead peer is an error after this
  double bucket_mb = 25;          // gradient all-reduce bucket size
  bool broadcast_buffers = true;  // BatchNorm statistics from rank 0 before every step, as DDP does
  bool ledger = false;            // record the sample ids of every committed step (verify-ledger)
};

}  // namespace shoplens
