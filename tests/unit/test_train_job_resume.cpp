// The training job's resume policy (decide_resume): a restart resumes "auto", a checkpoint's saved
// config is the base the command line overrides, "auto" before any checkpoint starts from the
// run directory's config.json.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/jobs/train_job.h"
#include "shoplens/train/checkpoint.h"
#include "test_util.h"

namespace shoplens {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// What the command line lays over a saved config: here, 7 epochs.
Config over_with_seven_epochs(const json& base) {
  Config c = config_from_json(base, "saved");
  c.train.epochs = 7;
  return c;
}

Config command_line_config(const fs::path& run_dir) {
  Config c;
  c.run.dir = run_dir.string();
  c.train.epochs = 7;
  return c;
}

json saved_config(int max_steps) {
  Config saved;
  saved.train.max_steps = max_steps;
  saved.data.shards = "/data/shards";
  return config_to_json(saved);
}

TEST(TrainJobResume, ARestartResumesTheNewestCheckpointUnderTheCommandLine) {
  testing::ScratchDir dir("resume-restart");
  CheckpointStore store(dir.path() / "checkpoints", 3);
  store.save(4, {{"config", saved_config(40)}}, "tensors", false);
  store.save(8, {{"config", saved_config(80)}}, "tensors", false);
  DistEnv env;
  env.restart_count = 1;
  const ResumeDecision d = decide_resume(command_line_config(dir.path()), "", env, over_with_seven_epochs);
  ASSERT_TRUE(d.checkpoint);
  EXPECT_EQ(d.checkpoint->path.filename(), "step-000000000008.ckpt");
  EXPECT_EQ(d.config.train.max_steps, 80);  // the checkpoint's config comes back
  EXPECT_EQ(d.config.train.epochs, 7);      // and the command line overrides it
  EXPECT_EQ(d.config.data.shards, "/data/shards");
  EXPECT_EQ(d.config.run.dir, dir.path().string());  // the run directory defaults to the checkpoint's

  // Neither a restart nor --resume: a fresh run whatever the folder holds.
  const ResumeDecision fresh = decide_resume(command_line_config(dir.path()), "", DistEnv{}, over_with_seven_epochs);
  EXPECT_FALSE(fresh.checkpoint);
  EXPECT_EQ(fresh.config.train.max_steps, 0);
  // --resume FILE names the checkpoint itself.
  const auto named =
      decide_resume(command_line_config(dir.path()), store.list().front().string(), DistEnv{}, over_with_seven_epochs);
  EXPECT_EQ(named.config.train.max_steps, 40);
}

TEST(TrainJobResume, AutoBeforeTheFirstCheckpointStartsFromTheSavedConfig) {
  testing::ScratchDir dir("resume-config-json");
  json saved = saved_config(12);
  saved["_run"] = {{"commit", "abc"}};  // what the run writes beside the config, not a setting
  write_file_atomic(dir.path() / "config.json", saved.dump());
  const ResumeDecision d = decide_resume(command_line_config(dir.path()), "auto", DistEnv{}, over_with_seven_epochs);
  EXPECT_FALSE(d.checkpoint);
  EXPECT_EQ(d.config.train.max_steps, 12);
  EXPECT_EQ(d.config.train.epochs, 7);
  EXPECT_EQ(d.config.run.dir, dir.path().string());
}

TEST(TrainJobResume, AutoWithNothingToResumeAndNoShardsIsAUsageError) {
  testing::ScratchDir dir("resume-nothing");
  EXPECT_THAT([&] { decide_resume(command_line_config(dir.path()), "auto", DistEnv{}, over_with_seven_epochs); },
              ::testing::ThrowsMessage<UsageError>(::testing::HasSubstr("nothing to resume")));
  Config with_shards = command_line_config(dir.path());
  with_shards.data.shards = "/data/shards";
  EXPECT_EQ(decide_resume(with_shards, "auto", DistEnv{}, over_with_seven_epochs).config.data.shards, "/data/shards");
  EXPECT_THROW(decide_resume(Config{}, "auto", DistEnv{}, over_with_seven_epochs), UsageError);  // no run dir
}

}  // namespace
}  // namespace shoplens
