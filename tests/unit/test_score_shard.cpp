// The shard a score process takes: --shard, or the environment of torchrun / `shoplens launch`, a
// Slurm array, srun, or a Kubernetes Indexed Job (fake environments), and the rows of each shard.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "shoplens/core/errors.h"
#include "shoplens/infer/score_shard.h"

namespace shoplens {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Vars = std::map<std::string, std::string>;

ScoreShard resolve(const Vars& vars, const ShardRequest& request = {}) {
  return resolve_score_shard(request, [&vars](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

TEST(ScoreShard, NoFlagNoEnvironmentIsTheWholeInput) {
  const ScoreShard s = resolve({});
  EXPECT_FALSE(s.sharded());
  EXPECT_EQ(s.count, 1u);
  EXPECT_EQ(s.source, "none");
  // A plain sbatch job has SLURM_PROCID=0 and SLURM_NTASKS=1: one shard, the whole input.
  EXPECT_FALSE(resolve({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}}).sharded());
}

TEST(ScoreShard, TheFlagWinsOverTheEnvironmentAndSaysSo) {
  const ScoreShard s = resolve({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"SLURM_ARRAY_TASK_ID", "3"}}, {"2/5", 0});
  EXPECT_EQ(s.index, 2u);
  EXPECT_EQ(s.count, 5u);
  EXPECT_EQ(s.source, "--shard");
  EXPECT_EQ(s.describe(), "shard 2 of 5 (from --shard)");
  EXPECT_EQ(s.folder(), "shard-00002-of-00005");
}

TEST(ScoreShard, TorchrunAndLaunchGiveRankWorldSizeAndTheLocalGpu) {
  const ScoreShard s =
      resolve({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}});
  EXPECT_EQ(s.index, 3u);
  EXPECT_EQ(s.count, 4u);
  EXPECT_EQ(s.local_rank, 1);
  EXPECT_THAT(s.source, HasSubstr("RANK/WORLD_SIZE"));
  // Read as training reads them (dist_placement_from): the same checks, the same ConfigError.
  EXPECT_THAT([] { resolve({{"RANK", "1"}}); }, ThrowsMessage<ConfigError>(HasSubstr("WORLD_SIZE")));
  EXPECT_THAT(
      [] {
        resolve({{"RANK", "4"}, {"WORLD_SIZE", "4"}});
      },
      ThrowsMessage<ConfigError>(AllOf(HasSubstr("RANK"), HasSubstr("WORLD_SIZE"))));
}

TEST(ScoreShard, ASlurmArrayCountsFromItsFirstIdInItsSteps) {
  const ScoreShard plain = resolve(
      {{"SLURM_ARRAY_TASK_ID", "2"}, {"SLURM_ARRAY_TASK_COUNT", "4"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}});
  EXPECT_EQ(plain.index, 2u);
  EXPECT_EQ(plain.count, 4u);
  EXPECT_THAT(plain.source, HasSubstr("SLURM_ARRAY_TASK_ID"));
  // --array=10-13
  const ScoreShard offset =
      resolve({{"SLURM_ARRAY_TASK_ID", "12"}, {"SLURM_ARRAY_TASK_COUNT", "4"}, {"SLURM_ARRAY_TASK_MIN", "10"}});
  EXPECT_EQ(offset.index, 2u);
  // --array=0-12:4
  const ScoreShard stepped = resolve({{"SLURM_ARRAY_TASK_ID", "8"},
                                      {"SLURM_ARRAY_TASK_COUNT", "4"},
                                      {"SLURM_ARRAY_TASK_MIN", "0"},
                                      {"SLURM_ARRAY_TASK_STEP", "4"}});
  EXPECT_EQ(stepped.index, 2u);
  EXPECT_THAT(
      [] {
        resolve({{"SLURM_ARRAY_TASK_ID", "2"}});
      },
      ThrowsMessage<UsageError>(HasSubstr("SLURM_ARRAY_TASK_COUNT")));
  // --array=1,5,9: ids that are no range cannot name shards.
  EXPECT_THAT(
      [] {
        resolve({{"SLURM_ARRAY_TASK_ID", "5"},
                 {"SLURM_ARRAY_TASK_COUNT", "3"},
                 {"SLURM_ARRAY_TASK_MIN", "1"},
                 {"SLURM_ARRAY_TASK_STEP", "1"},
                 {"SLURM_ARRAY_TASK_MAX", "9"}});
      },
      ThrowsMessage<UsageError>(HasSubstr("--shard I/N")));
}

TEST(ScoreShard, SrunTasksAreShardsWithTheirLocalId) {
  const ScoreShard s = resolve({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"}});
  EXPECT_EQ(s.index, 5u);
  EXPECT_EQ(s.count, 8u);
  EXPECT_EQ(s.local_rank, 1);
  EXPECT_THAT(s.source, HasSubstr("SLURM_PROCID"));
}

TEST(ScoreShard, AnIndexedJobTakesItsCountFromTheFlagOrTheEnvironment) {
  const ScoreShard flag = resolve({{"JOB_COMPLETION_INDEX", "3"}}, {"", 6});
  EXPECT_EQ(flag.index, 3u);
  EXPECT_EQ(flag.count, 6u);
  EXPECT_THAT(flag.source, HasSubstr("--shard-count"));
  const ScoreShard env = resolve({{"JOB_COMPLETION_INDEX", "0"}, {"SHOPLENS_SHARD_COUNT", "2"}});
  EXPECT_EQ(env.count, 2u);
  EXPECT_THAT(env.source, HasSubstr("SHOPLENS_SHARD_COUNT"));
  EXPECT_THAT(
      [] {
        resolve({{"JOB_COMPLETION_INDEX", "1"}});
      },
      ThrowsMessage<UsageError>(AllOf(HasSubstr("--shard-count"), HasSubstr("SHOPLENS_SHARD_COUNT"))));
  EXPECT_THAT(
      [] {
        resolve({{"JOB_COMPLETION_INDEX", "6"}}, {"", 6});
      },
      ThrowsMessage<UsageError>(HasSubstr("JOB_COMPLETION_INDEX")));
  EXPECT_THAT([] { resolve({}, {"", 4}); }, ThrowsMessage<UsageError>(HasSubstr("JOB_COMPLETION_INDEX")));
}

TEST(ScoreShard, AMalformedShardNamesTheFlagOrVariable) {
  for (const std::string bad : {"3", "1/0", "4/4", "-1/4", "a/4", "1/4/2", "1/"})
    EXPECT_THAT([&] { resolve({}, {bad, 0}); }, ThrowsMessage<UsageError>(HasSubstr("--shard"))) << bad;
  EXPECT_THAT([] { resolve({{"RANK", "x"}, {"WORLD_SIZE", "2"}}); }, ThrowsMessage<ConfigError>(HasSubstr("RANK='x'")));
  EXPECT_THAT([] { resolve({}, {"1/4", 4}); }, ThrowsMessage<UsageError>(HasSubstr("not both")));
}

TEST(ScoreShard, ShardsTileTheRowsInWholeChunksWithinOneChunkOfEachOther) {
  for (const std::size_t rows : {0u, 1u, 7u, 10u, 1000003u}) {
    for (const std::size_t count : {1u, 3u, 4u, 16u}) {
      for (const std::size_t chunk : {1u, 3u, 1024u}) {
        std::size_t next = 0, smallest = rows, largest = 0;
        for (std::size_t i = 0; i < count; ++i) {
          const RowRange r = shard_rows(rows, i, count, chunk);
          EXPECT_EQ(r.begin, next) << rows << " rows, shard " << i << " of " << count << ", chunks of " << chunk;
          EXPECT_TRUE(r.begin % chunk == 0 || r.begin == rows) << "a shard starts at a chunk of the whole input";
          next = r.end;
          smallest = std::min(smallest, r.size());
          largest = std::max(largest, r.size());
        }
        EXPECT_EQ(next, rows);
        EXPECT_LE(largest - smallest, chunk);
      }
    }
  }
  EXPECT_EQ(shard_rows(10, 1, 4).begin, 2u);  // chunks of 1 row: floor(10 * 1 / 4)
  EXPECT_EQ(shard_rows(10, 1, 4).end, 5u);
  EXPECT_EQ(shard_rows(43, 1, 2, 4).begin, 20u);  // 11 chunks of 4: shard 1 of 2 from chunk 5
  EXPECT_EQ(shard_rows(43, 1, 2, 4).end, 43u);
  EXPECT_EQ(shard_rows(10, 3, 4, 100).size(), 10u);  // one chunk: the last shard holds it, the others none
  EXPECT_EQ(shard_rows(10, 0, 4, 100).size(), 0u);
  EXPECT_THROW(shard_rows(10, 4, 4), UsageError);
}

}  // namespace
}  // namespace shoplens
