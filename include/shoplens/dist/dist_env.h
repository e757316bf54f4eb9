// Where this process sits in a data-parallel job, read from the environment a launcher sets:
// torchrun's contract (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
// TORCHELASTIC_RESTART_COUNT), which `shoplens launch` also follows, or Slurm's (SLURM_PROCID,
// SLURM_NTASKS, SLURM_LOCALID, ...) under srun. Plain C++: the parser takes the lookup function,
// so tests feed it maps instead of touching the real environment.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace shoplens {

struct DistEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  int restart_count = 0;           // TORCHELASTIC_RESTART_COUNT: > 0 means "resume from the latest checkpoint"
  bool agent_hosts_store = false;  // TORCHELASTIC_USE_AGENT_STORE: the launcher, not rank 0, runs the TCPStore
  std::string source = "none";     // "torchrun", "slurm" or "none"

  bool distributed() const { return world_size > 1; }
  std::string describe() const;  // "rank 1 of 2 (local 1 of 2), master 127.0.0.1:29500, from torchrun"
};

using EnvLookup = std::function<const char*(const char*)>;

// Where a process sits among its launcher's processes, read alone: the placement part of DistEnv
// without the rendezvous (MASTER_ADDR, the port), for jobs whose processes never talk to each
// other, such as sharded scoring. ConfigError naming the variable, as dist_env_from.
struct DistPlacement {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  bool local_rank_given = false;  // LOCAL_RANK or SLURM_LOCALID was set
  std::string source = "none";    // "torchrun", "slurm" or "none"
};
DistPlacement dist_placement_from(const EnvLookup& lookup);

// The job's place from the environment; a single process when none of the variables is set.
// ConfigError naming the variable when one is malformed or they contradict each other.
DistEnv dist_env_from(const EnvLookup& lookup);
DistEnv dist_env_from_process();

}  // namespace shoplens
