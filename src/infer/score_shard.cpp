// The shard a score process takes, from --shard or its launcher's environment (score_shard.h).
#include "shoplens/infer/score_shard.h"

#include <cerrno>
#include <cstdlib>

#include <fmt/format.h>

#include "shoplens/core/errors.h"

namespace shoplens {
namespace {

std::optional<std::string> env_value(const EnvLookup& lookup, const char* name) {
  const char* value = lookup(name);
  if (!value || !*value) return std::nullopt;
  return std::string(value);
}

// A whole number >= `min_value`, all of `text`; UsageError naming `what` otherwise.
std::size_t whole_number(const std::string& text, const std::string& what, std::size_t min_value) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || text[0] < '0' || text[0] > '9' || *end != '\0' || errno != 0 || value < min_value ||
      value > 1000000000ULL)
    throw UsageError(fmt::format("score: {}='{}' is not a whole number >= {}", what, text, min_value));
  return static_cast<std::size_t>(value);
}

std::size_t env_number(const EnvLookup& lookup, const char* name, std::size_t min_value) {
  return whole_number(*env_value(lookup, name), name, min_value);
}

ScoreShard checked(ScoreShard shard, const std::string& index_name, const std::string& count_name) {
  if (shard.index >= shard.count)
    throw UsageError(fmt::format("score: shard {} is outside a job of {} shards ({} must be below {}, counting from 0)",
                                 shard.index, shard.count, index_name, count_name));
  return shard;
}

ScoreShard from_flag(const std::string& text) {
  const auto slash = text.find('/');
  if (slash == std::string::npos)
    throw UsageError(fmt::format("score: --shard '{}' is not I/N (e.g. --shard 0/4: the first of 4 shards)", text));
  ScoreShard shard;
  shard.index = whole_number(text.substr(0, slash), "--shard's index", 0);
  shard.count = whole_number(text.substr(slash + 1), "--shard's count", 1);
  shard.source = "--shard";
  return checked(shard, "--shard's I", "its N");
}

// torchrun, `shoplens launch` or srun tasks: the shard is the process's place in the job, read as
// training reads it (dist_placement_from); the local rank, when the launcher gave one, picks the GPU.
ScoreShard from_placement(const DistPlacement& placement) {
  ScoreShard shard;
  shard.index = static_cast<std::size_t>(placement.rank);
  shard.count = static_cast<std::size_t>(placement.world_size);
  shard.source = placement.source == "slurm" ? "SLURM_PROCID/SLURM_NTASKS (srun tasks)"
                                             : "RANK/WORLD_SIZE (torchrun or shoplens launch)";
  if (placement.local_rank_given) shard.local_rank = placement.local_rank;
  return shard;
}

// Array ids run from SLURM_ARRAY_TASK_MIN in steps of SLURM_ARRAY_TASK_STEP (--array=4-7 or
// 0-12:4); the shard is the id's place among them.
ScoreShard from_slurm_array(const EnvLookup& lookup) {
  if (!env_value(lookup, "SLURM_ARRAY_TASK_COUNT"))
    throw UsageError(
        "score: SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not (Slurm sets both in an array "
        "job); give --shard I/N");
  const std::size_t id = env_number(lookup, "SLURM_ARRAY_TASK_ID", 0);
  const std::size_t min = env_value(lookup, "SLURM_ARRAY_TASK_MIN") ? env_number(lookup, "SLURM_ARRAY_TASK_MIN", 0) : 0;
  const std::size_t step =
      env_value(lookup, "SLURM_ARRAY_TASK_STEP") ? env_number(lookup, "SLURM_ARRAY_TASK_STEP", 1) : 1;
  const std::size_t count = env_number(lookup, "SLURM_ARRAY_TASK_COUNT", 1);
  if (id < min || (id - min) % step != 0 || (id - min) / step >= count)
    throw UsageError(fmt::format(
        "score: SLURM_ARRAY_TASK_ID {} is not one of SLURM_ARRAY_TASK_COUNT {} ids from SLURM_ARRAY_TASK_MIN {} in "
        "steps of SLURM_ARRAY_TASK_STEP {}: an array with a list of ids (--array=1,5,9) cannot name shards; use a "
        "range (--array=0-{}) or --shard I/N",
        id, count, min, step, count - 1));
  ScoreShard shard;
  shard.index = (id - min) / step;
  shard.count = count;
  shard.source = "SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT (Slurm job array)";
  return checked(shard, "(SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN) / SLURM_ARRAY_TASK_STEP",
                 "SLURM_ARRAY_TASK_COUNT");
}

ScoreShard from_indexed_job(const ShardRequest& request, const EnvLookup& lookup) {
  ScoreShard shard;
  shard.index = env_number(lookup, "JOB_COMPLETION_INDEX", 0);
  if (request.shard_count > 0) {
    shard.count = request.shard_count;
  } else if (env_value(lookup, "SHOPLENS_SHARD_COUNT")) {
    shard.count = env_number(lookup, "SHOPLENS_SHARD_COUNT", 1);
  } else {
    throw UsageError(
        "score: JOB_COMPLETION_INDEX is set but not the number of shards: give --shard-count N or "
        "SHOPLENS_SHARD_COUNT=N (the Indexed Job's completions)");
  }
  shard.source = "JOB_COMPLETION_INDEX (Kubernetes Indexed Job) with " +
                 std::string(request.shard_count > 0 ? "--shard-count" : "SHOPLENS_SHARD_COUNT");
  return checked(shard, "JOB_COMPLETION_INDEX", "the shard count");
}

}  // namespace

std::string ScoreShard::name() const { return fmt::format("shard {} of {}", index, count); }

std::string ScoreShard::describe() const { return fmt::format("{} (from {})", name(), source); }

std::string ScoreShard::folder() const { return fmt::format("shard-{:05d}-of-{:05d}", index, count); }

ScoreShard resolve_score_shard(const ShardRequest& request, const EnvLookup& lookup) {
  if (!request.shard.empty()) {
    if (request.shard_count > 0) throw UsageError("score: give --shard I/N or --shard-count N, not both");
    return from_flag(request.shard);
  }
  if (env_value(lookup, "RANK") || env_value(lookup, "WORLD_SIZE")) return from_placement(dist_placement_from(lookup));
  if (env_value(lookup, "SLURM_ARRAY_TASK_ID")) return from_slurm_array(lookup);
  if (env_value(lookup, "SLURM_PROCID") && env_value(lookup, "SLURM_NTASKS"))
    return from_placement(dist_placement_from(lookup));
  if (env_value(lookup, "JOB_COMPLETION_INDEX")) return from_indexed_job(request, lookup);
  if (request.shard_count > 0)
    throw UsageError("score: --shard-count goes with JOB_COMPLETION_INDEX (a Kubernetes Indexed Job); use --shard I/N");
  return {};
}

RowRange shard_rows(std::size_t rows, std::size_t index, std::size_t count, std::size_t chunk_rows) {
  if (count == 0 || index >= count) throw UsageError(fmt::format("score: shard {} of {} does not exist", index, count));
  if (chunk_rows == 0) throw UsageError("score: --chunk-rows must be >= 1");
  const std::size_t chunks = (rows + chunk_rows - 1) / chunk_rows;
  // 128-bit products: chunks * index overflows 64 bits only beyond any real input, but costs nothing.
  const auto at = [&](std::size_t i) {
    const auto chunk = static_cast<std::size_t>(static_cast<unsigned __int128>(chunks) * i / count);
    return std::min(rows, chunk * chunk_rows);
  };
  return {at(index), at(index + 1)};
}

}  // namespace shoplens
