// Which part of the input one `shoplens score` process scores (docs/SCORING.md, "Sharded
// scoring"). A job of N shards cuts the input's rows into N contiguous ranges, the same ranges
// whenever the input has the same row count; shard I is the I-th. The shard comes from --shard I/N
// or from the environment the process was started in (torchrun or `shoplens launch`, a Slurm job
// array, srun's tasks, a Kubernetes Indexed Job). Plain C++: the resolver takes the lookup
// function (dist_env.h's EnvLookup), so tests feed it maps instead of the process environment.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "shoplens/dist/dist_env.h"

namespace shoplens {

struct ScoreShard {
  std::size_t index = 0;
  std::size_t count = 1;
  std::string source = "none";  // where it came from: "--shard", "torchrun (RANK/WORLD_SIZE)", ...
  // The process's GPU among the node's shards (LOCAL_RANK, SLURM_LOCALID); none: the current one.
  std::optional<int> local_rank;

  bool sharded() const { return count > 1; }
  std::string name() const;      // "shard 2 of 4" ("shard 2/4 from SLURM_ARRAY_TASK_ID" in describe)
  std::string describe() const;  // "shard 2 of 4 (from --shard)"
  std::string folder() const;    // "shard-00002-of-00004": its folder under score's --out
};

// What the command line says about the shard: --shard "I/N" (empty: not given) and --shard-count
// N, the count that goes with an index-only environment (JOB_COMPLETION_INDEX; 0: not given).
struct ShardRequest {
  std::string shard;
  std::size_t shard_count = 0;
};

// The shard, by the first that applies: --shard; torchrun's RANK/WORLD_SIZE (also `shoplens
// launch`); a Slurm array (SLURM_ARRAY_TASK_ID, SLURM_ARRAY_TASK_COUNT, and _MIN/_STEP for arrays
// that do not start at 0 or skip ids); srun's SLURM_PROCID/SLURM_NTASKS; JOB_COMPLETION_INDEX with
// --shard-count or SHOPLENS_SHARD_COUNT. None of them: one shard (the whole input). UsageError
// naming the flag or variable when one is malformed, out of range or missing its partner.
ScoreShard resolve_score_shard(const ShardRequest& request, const EnvLookup& lookup);

// Rows [begin, end) of an input of `rows` rows that shard `index` of `count` scores, in whole
// chunks of `chunk_rows`: of the input's C = ceil(rows / chunk_rows) chunks, shard i takes chunks
// [floor(i * C / n), floor((i + 1) * C / n)). So the shards tile the input, their sizes are within
// one chunk of each other, and each shard's chunks, row windows and batches are the ones a single
// process over the whole input scores: the merged predictions are that process's, to the bit.
struct RowRange {
  std::size_t begin = 0, end = 0;
  std::size_t size() const { return end - begin; }
};
RowRange shard_rows(std::size_t rows, std::size_t index, std::size_t count, std::size_t chunk_rows = 1);

}  // namespace shoplens
