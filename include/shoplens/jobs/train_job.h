// A training job, config in, run directory out: the dataset opened by kind (image or text
// shards), the memory budget, `loader.batch_size=auto` through find-batch, the process group of a
// data-parallel run, the run directory, the model with its starting weights, and the trainer.
// `shoplens train` resolves the config (defaults < file < a resumed checkpoint's saved config <
// the command line) and hands it here.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "shoplens/core/config.h"
#include "shoplens/dist/dist_env.h"
#include "shoplens/train/checkpoint.h"
#include "shoplens/train/trainer.h"

namespace shoplens {

struct TrainJob {
  Config config;                         // resolved
  std::optional<Checkpoint> checkpoint;  // resume from it (its weights, optimizer and position)
  DistEnv env;                           // this process's place in a data-parallel run (one process: the default)
  // The shoplens program (`/proc/self/exe` of the CLI). Given, `loader.batch_size: auto` on CPU with
  // a memory budget searches in a child `find-batch` (process_check): the probes' cached
  // primitives then stay out of the training process. Empty: the search runs in this process.
  std::filesystem::path program;
};

struct TrainJobResult {
  std::filesystem::path run_dir;
  nlohmann::json summary;  // what summary.json holds
};

// Runs the job to its end. Rank 0 writes the run directory's files; every rank returns the summary.
TrainJobResult run_train_job(TrainJob job);

// The checkpoint `--resume` names: "" none; a checkpoint file (an unreadable one is an error); or
// "auto", the newest valid one in the run directory's checkpoints/ (none there: a fresh start, said
// in the log). UsageError for "auto" without a run directory.
std::optional<Checkpoint> find_resume_checkpoint(const Config& config, const std::string& resume);

// The resume policy of a training job. `resume` is --resume ("" none, "auto", or a checkpoint
// file); a restarted worker (env.restart_count > 0, torchrun's contract) resumes "auto" when none
// is given. A checkpoint's saved config is the base that `over` lays the command line's settings
// on (defaults < file < checkpoint's config < --set < flags), and the run directory defaults to
// the checkpoint's; "auto" before the first checkpoint starts afresh from the run directory's
// config.json when a first attempt wrote one. UsageError for "auto" with nothing to resume and
// no --shards.
struct ResumeDecision {
  Config config;                         // resolved: the job's config
  std::optional<Checkpoint> checkpoint;  // what the job resumes from
};
using ConfigOverBase = std::function<Config(const nlohmann::json& base)>;
ResumeDecision decide_resume(const Config& config, std::string resume, const DistEnv& env, const ConfigOverBase& over);

// The splits of a prepared dataset folder, image or text shards (a text dataset also fills
// config.text with its shape). DataError when the train split is empty.
TrainData open_train_data(Config& config);

// How fast the job's training loader delivers samples beside training, for find-batch's throughput
// plan (find_batch's input_images_per_second): about 3 s of reading alone, times
// find_batch.input_rate_share. 0 when the plan does not use it:
// find_batch.objective memory, or a distributed run (ranks measure apart and could plan
// different batches from noisy rates, so they plan on the step's rates alone).
double plan_input_rate(const Config& config, const TrainData& data, const DistEnv& env);

// A resumed run keeps its global batch, so that its position in the epoch's order stays exact:
// on another world size the accumulation makes up the difference (elastic resume). ConfigError
// when it cannot.
void keep_global_batch(Config& config, const Checkpoint& checkpoint, int world);

}  // namespace shoplens
