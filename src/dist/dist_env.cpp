#include "shoplens/dist/dist_env.h"

#include <cstdlib>

#include <fmt/format.h>

#include "shoplens/core/errors.h"

namespace shoplens {
namespace {

std::optional<std::string> get(const EnvLookup& lookup, const char* name) {
  const char* value = lookup(name);
  if (!value || !*value) return std::nullopt;
  return std::string(value);
}

int get_int(const EnvLookup& lookup, const char* name, int fallback, int min_value) {
  const auto text = get(lookup, name);
  if (!text) return fallback;
  char* end = nullptr;
  const long value = std::strtol(text->c_str(), &end, 10);
  if (end == text->c_str() || *end != '\0' || value < min_value || value > 1000000)
    throw ConfigError(fmt::format("environment variable {}='{}' is not an integer >= {}", name, *text, min_value));
  return static_cast<int>(value);
}

}  // namespace

std::string DistEnv::describe() const {
  return fmt::format("rank {} of {} (local {} of {}), master {}:{}, from {}{}", rank, world_size, local_rank,
                     local_world_size, master_addr, master_port, source,
                     restart_count > 0 ? fmt::format(", restart {}", restart_count) : "");
}

DistPlacement dist_placement_from(const EnvLookup& lookup) {
  DistPlacement p;
  const bool torchrun = get(lookup, "RANK") || get(lookup, "WORLD_SIZE");
  const bool slurm = !torchrun && get(lookup, "SLURM_PROCID") && get(lookup, "SLURM_NTASKS");
  if (torchrun) {
    if (!get(lookup, "RANK") || !get(lookup, "WORLD_SIZE"))
      throw ConfigError("RANK and WORLD_SIZE must be set together (torchrun's environment contract)");
    p.source = "torchrun";
    p.rank = get_int(lookup, "RANK", 0, 0);
    p.world_size = get_int(lookup, "WORLD_SIZE", 1, 1);
    p.local_rank_given = get(lookup, "LOCAL_RANK").has_value();
    p.local_rank = get_int(lookup, "LOCAL_RANK", p.rank, 0);
    p.local_world_size = get_int(lookup, "LOCAL_WORLD_SIZE", p.world_size, 1);
  } else if (slurm) {
    p.source = "slurm";
    p.rank = get_int(lookup, "SLURM_PROCID", 0, 0);
    p.world_size = get_int(lookup, "SLURM_NTASKS", 1, 1);
    p.local_rank_given = get(lookup, "SLURM_LOCALID").has_value();
    p.local_rank = get_int(lookup, "SLURM_LOCALID", 0, 0);
    // SLURM_NTASKS_PER_NODE can read "2(x3)"; the leading count is the tasks on this node.
    p.local_world_size = p.world_size;
    if (auto per_node = get(lookup, "SLURM_NTASKS_PER_NODE"))
      p.local_world_size = std::max(1, std::atoi(per_node->c_str()));
  } else {
    return p;
  }
  if (p.rank >= p.world_size)
    throw ConfigError(fmt::format("rank {} is outside a world of {} ({})", p.rank, p.world_size,
                                  torchrun ? "RANK >= WORLD_SIZE" : "SLURM_PROCID >= SLURM_NTASKS"));
  if (p.local_rank >= p.local_world_size)
    throw ConfigError(
        fmt::format("local rank {} is outside {} local processes ({})", p.local_rank, p.local_world_size,
                    torchrun ? "LOCAL_RANK >= LOCAL_WORLD_SIZE" : "SLURM_LOCALID >= SLURM_NTASKS_PER_NODE"));
  if (p.local_world_size > p.world_size)
    throw ConfigError(fmt::format("LOCAL_WORLD_SIZE {} exceeds WORLD_SIZE {}", p.local_world_size, p.world_size));
  return p;
}

DistEnv dist_env_from(const EnvLookup& lookup) {
  const DistPlacement p = dist_placement_from(lookup);
  DistEnv env;
  if (p.source == "none") return env;
  env.source = p.source;
  env.rank = p.rank;
  env.world_size = p.world_size;
  env.local_rank = p.local_rank;
  env.local_world_size = p.local_world_size;
  const bool slurm = p.source == "slurm";
  env.restart_count = get_int(lookup, slurm ? "SLURM_RESTART_COUNT" : "TORCHELASTIC_RESTART_COUNT", 0, 0);
  if (auto use_agent = get(lookup, "TORCHELASTIC_USE_AGENT_STORE"))
    env.agent_hosts_store = *use_agent == "True" || *use_agent == "1";
  env.master_port = get_int(lookup, "MASTER_PORT", 29500, 1);
  if (env.master_port > 65535) throw ConfigError(fmt::format("MASTER_PORT {} is not a TCP port", env.master_port));
  if (auto addr = get(lookup, "MASTER_ADDR")) {
    env.master_addr = *addr;
  } else if (env.world_size > 1 && env.local_world_size < env.world_size) {
    // Several nodes: guessing the master would connect ranks to different stores.
    throw ConfigError(slurm
                          ? "MASTER_ADDR is not set: under srun export it, e.g. MASTER_ADDR=$(scontrol show hostnames "
                            "\"$SLURM_JOB_NODELIST\" | head -n1)"
                          : "MASTER_ADDR is not set for a job that spans several nodes");
  }
  return env;
}

DistEnv dist_env_from_process() {
  return dist_env_from([](const char* name) { return std::getenv(name); });
}

}  // namespace shoplens
