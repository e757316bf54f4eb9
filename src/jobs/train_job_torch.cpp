// The training job behind `shoplens train` (include/shoplens/jobs/train_job.h).
#include "shoplens/jobs/train_job.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <iostream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "shoplens/batch/find_batch.h"
#include "shoplens/batch/memory_probe.h"
#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/hash.h"
#include "shoplens/core/logging.h"
#include "shoplens/core/plural.h"
#include "shoplens/core/run_dir.h"
#include "shoplens/core/runtime.h"
#include "shoplens/core/subprocess.h"
#include "shoplens/core/strings.h"
#include "shoplens/data/shards.h"
#include "shoplens/data/text_batches.h"
#include "shoplens/data/text_shards.h"
#include "shoplens/data/text_task.h"
#include "shoplens/dist/cuda_device.h"
#include "shoplens/dist/process_group.h"
#include "shoplens/models/classifier.h"
#include "shoplens/models/weights.h"

namespace shoplens {
namespace {

namespace fs = std::filesystem;

constexpr double kInputRateSeconds = 3.0;  // long enough to fill the loader's prefetch ring several times

template <class Source>
std::shared_ptr<const SampleSource> non_empty(std::shared_ptr<const Source> split, const std::string& shards,
                                              Split which) {
  if (split && split->size() > 0) return split;
  spdlog::warn("train: the {} split of {} is empty", split_name(which), shards);
  return nullptr;
}

TrainData open_image_data(const Config& config) {
  const std::string& shards = config.data.shards;
  TrainData data;
  auto train = ShardDataset::open(shards, Split::kTrain);
  data.class_names = train->info().classes;
  data.train = non_empty<ShardDataset>(train, shards, Split::kTrain);
  if (!data.train) throw DataError("train: " + shards + " has no training samples");
  data.val = non_empty<ShardDataset>(ShardDataset::open(shards, Split::kVal), shards, Split::kVal);
  data.test = non_empty<ShardDataset>(ShardDataset::open(shards, Split::kTest), shards, Split::kTest);
  if (!config.data.classes.empty() && config.data.classes != data.class_names)
    throw ConfigError("data.classes " + nlohmann::json(config.data.classes).dump() +
                      " differ from the shards' classes " + nlohmann::json(data.class_names).dump());
  return data;
}

// Text shards: config.text learns the dataset's shape (saved with the run), and the loader builds
// token batches with length bucketing (docs/TEXT.md).
TrainData open_text_data(Config& config) {
  const std::string& shards = config.data.shards;
  const TextDatasetInfo info = read_text_dataset_info(shards);
  resolve_text_config(config, info, shards);
  TrainData data;
  data.class_names = text_class_names();
  data.train = non_empty<TextSource>(open_text_split(shards, Split::kTrain), shards, Split::kTrain);
  if (!data.train) throw DataError("train: " + shards + " has no training examples");
  data.val = non_empty<TextSource>(open_text_split(shards, Split::kVal), shards, Split::kVal);
  data.test = non_empty<TextSource>(open_text_split(shards, Split::kTest), shards, Split::kTest);
  const TextBatchOptions options = text_batch_options(config, info);
  data.make_builder = [options](const std::shared_ptr<const SampleSource>& split, const LoaderOptions&) {
    return std::make_shared<TextBatchBuilder>(std::dynamic_pointer_cast<const TextSource>(split), options);
  };
  return data;
}

// Fault injection for the tests (docs/DISTRIBUTED.md): SHOPLENS_FAULT_KILL_STEP=N with
// SHOPLENS_FAULT_KILL_RANK=R kills rank R with SIGKILL right after step N, before its ledger line
// for the step is written, on the first attempt only (a restarted job runs clean).
std::function<void(std::int64_t)> fault_hook(const DistEnv& env) {
  const char* step = std::getenv("SHOPLENS_FAULT_KILL_STEP");
  if (!step || env.restart_count > 0) return nullptr;
  const char* rank = std::getenv("SHOPLENS_FAULT_KILL_RANK");
  if (rank && std::atoi(rank) != env.rank) return nullptr;
  const std::int64_t at = std::atoll(step);
  return [at](std::int64_t done) {
    if (done == at) {
      spdlog::warn("fault injection: SIGKILL after step {}", done);
      std::raise(SIGKILL);
    }
  };
}

// Refuses what cannot run before any work: a distributed run without a shared run directory, a
// fresh run over another run's checkpoints.
void check_job(const TrainJob& job) {
  const Config& config = job.config;
  if (job.env.distributed() && config.run.dir.empty())
    throw UsageError("train: a distributed run needs --out (run.dir): every rank writes into the same run directory");
  const fs::path existing = fs::path(config.run.dir) / "checkpoints";
  if (!job.checkpoint && !config.run.dir.empty() && fs::is_directory(existing) &&
      (!CheckpointStore(existing, 1).list().empty() || fs::exists(existing / "best.ckpt")))
    throw UsageError("train: " + config.run.dir +
                     " already holds checkpoints of a run; continue it with --resume auto, "
                     "or choose another --out");
}

// The search in a child `find-batch` with this job's config: a CPU process keeps the oneDNN
// primitives of every batch shape it ran, and a search runs many, so the training process would hold
// them beside its own and outgrow a budget its batch was chosen to fit. The child's log is passed on.
nlohmann::json find_the_batch_in_a_child(const Config& config, const fs::path& program) {
  ProbeFolder folder;
  const fs::path config_file = folder.path() / "config.json", out = folder.path() / "find_batch.json",
                 log = folder.path() / "find_batch.log";
  write_file_atomic(config_file, config_to_json(config).dump(2) + "\n");
  const ProcessExit exit =
      run_process({program.string(), "find-batch", "--config", config_file.string(), "-o", out.string()}, log);
  std::cerr << read_file(log) << std::flush;  // its probes, its table and its notes
  if (exit.interrupted()) throw InterruptedError();
  if (!exit.ok()) throw Error("train: the batch search (a child find-batch) failed: " + exit.describe());
  return nlohmann::json::parse(read_file(out));
}

// Runs the job with find-batch's plan (its JSON, from either process, agreed across ranks) and says so.
void apply_found_batch(Config& config, const nlohmann::json& found) {
  apply_planned_settings(config, planned_settings_from_json(found.at("config_patch"), "find-batch's plan"));
  spdlog::info(
      "train: loader.batch_size auto: micro-batch {} x {} accumulation (largest that fits: {}), lr {:.4g} "
      "({} probes{}{})",
      config.loader.batch_size, config.train.accumulation_steps, found.at("micro_batch").get<int>(), config.optim.lr,
      found.at("probes").size(), found.value("searched_in_a_child", false) ? ", searched in a child process" : "",
      found.value("from_cache", false) ? ", cached" : "");
  for (const auto& note : found.value("notes", nlohmann::json::array()))
    spdlog::info("train: find-batch: {}", note.get<std::string>());
}

// loader.batch_size=auto: find-batch's plan for this rank's device (applied once the ranks agree).
nlohmann::json find_the_batch(const Config& config, const TrainData& data, const DistEnv& env,
                              const fs::path& program) {
  const bool in_a_child = !program.empty() && !env.distributed() && !wants_cuda(config.train.device) &&
                          config.train.memory_budget.is_set() && config.find_batch.process_check;
  nlohmann::json found = in_a_child ? find_the_batch_in_a_child(config, program)
                                    : find_batch(config, static_cast<int>(data.class_names.size()),
                                                 /*use_cache=*/true, plan_input_rate(config, data, env))
                                          .to_json();
  if (in_a_child) found["searched_in_a_child"] = true;
  return found;
}

// What every rank must agree on to run the same job: its config, less what describes a rank's own
// device (the memory budget: a card with less free memory), and the checkpoint it starts from.
std::string job_fingerprint(const TrainJob& job) {
  nlohmann::json config = config_to_json(job.config);
  config["train"].erase("memory_budget");
  return Fingerprint()
      .add(config.dump())
      .add(job.checkpoint ? job.checkpoint->path.filename().string() : std::string("fresh"))
      .hex();
}

// Joins the data-parallel group: every rank must run the same job from the same checkpoint, and
// takes rank 0's name for this start (`segment`).
std::shared_ptr<ProcessGroup> join_group(const TrainJob& job, std::string& segment) {
  const Config& config = job.config;
  GroupOptions group_options;
  group_options.backend = config.dist.backend == DistBackend::kAuto
                              ? (wants_cuda(config.train.device) ? "nccl" : "gloo")
                              : name_in(kDistBackendNames, config.dist.backend);
  group_options.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(config.dist.timeout_seconds * 1000));
  group_options.fingerprint = job_fingerprint(job);
  auto group = join_process_group(job.env, group_options);
  segment = group->all_gather_string("segment", segment).front();
  return group;
}

// Rank 0 opens (and owns) the run directory; the other ranks write their logs into it.
fs::path open_job_run_dir(const TrainJob& job) {
  fs::path run_dir;
  if (job.env.rank == 0) {
    run_dir = open_run_dir(job.config, "train");
  } else {
    run_dir = job.config.run.dir;
    fs::create_directories(run_dir / "logs");
  }
  if (job.env.distributed()) {
    add_log_file(run_dir / "logs" / fmt::format("rank-{}.log", job.env.rank));
    if (job.env.rank > 0) set_console_level("warn");
  }
  return run_dir;
}

std::string segment_name(const DistEnv& env) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return fmt::format("seg-{}-{}", env.restart_count,
                     std::chrono::duration_cast<std::chrono::milliseconds>(now).count());
}

// `--resume auto` found step checkpoints and none reads back: a fresh start would write over them,
// so the user decides. Names each with its damage, and best.ckpt when it still reads back.
std::string every_checkpoint_damaged(const fs::path& dir, const std::vector<std::string>& damaged) {
  std::string message = "train: --resume auto: every checkpoint in " + dir.string() +
                        " is damaged, so there is nothing to resume, and a fresh run would write over them:";
  for (const auto& why : damaged) message += "\n  " + why;
  std::string best_hint;
  const fs::path best = dir / "best.ckpt";
  std::error_code ec;
  if (fs::exists(best, ec)) {
    try {
      const Checkpoint b = read_checkpoint(best);
      best_hint = fmt::format("; {} (step {}) reads back whole: --resume {} continues from it", best.string(),
                              b.state.value("step", std::int64_t{0}), best.string());
    } catch (const DataError& e) {
      message += "\n  " + std::string(e.what());
    }
  }
  return message + "\nMove the damaged files out of " + dir.string() +
         " (or the folder aside) to start afresh, or pass --resume FILE with a checkpoint that reads back" + best_hint;
}

}  // namespace

double plan_input_rate(const Config& config, const TrainData& data, const DistEnv& env) {
  if (config.find_batch.objective != BatchObjective::kThroughput || env.distributed()) return 0;
  const InputRate rate = measure_input_rate(data, config, kInputRateSeconds);
  if (rate.samples_per_second <= 0) {
    spdlog::info("train: the training split is too short to time its loader; find-batch plans on the step's rates");
    return 0;
  }
  const double share = config.find_batch.input_rate_share;
  spdlog::info(
      "train: the loader delivers {:.0f} samples/s alone ({:.1f} s over {} epoch{}); find-batch's plan counts no "
      "batch faster than {:.0f} (find_batch.input_rate_share {:g}: training shares the cores)",
      rate.samples_per_second, rate.seconds, rate.epochs, rate.epochs == 1 ? "" : "s", rate.samples_per_second * share,
      share);
  return rate.samples_per_second * share;
}

std::optional<Checkpoint> find_resume_checkpoint(const Config& config, const std::string& resume) {
  if (resume.empty()) return std::nullopt;
  if (resume != "auto") return read_checkpoint(resume);
  if (config.run.dir.empty())
    throw UsageError("train: --resume auto needs the run directory (--out or run.dir) to look for checkpoints in");
  const fs::path dir = fs::path(config.run.dir) / "checkpoints";
  if (!fs::is_directory(dir)) {
    spdlog::info("train: no checkpoints in {} yet; starting a fresh run", dir.string());
    return std::nullopt;
  }
  std::vector<std::string> damaged;
  auto found = CheckpointStore(dir, config.train.keep_last).newest_valid(&damaged);
  if (found) return found;
  if (!damaged.empty()) throw UsageError(every_checkpoint_damaged(dir, damaged));
  const fs::path best = dir / "best.ckpt";
  if (fs::exists(best))  // the step checkpoints were removed: continuing from the best one is the user's call
    throw UsageError("train: --resume auto: " + dir.string() +
                     " holds best.ckpt but no step checkpoint; pass --resume " + best.string() +
                     " to continue from it, or move it aside to start afresh");
  spdlog::info("train: no checkpoints in {} yet; starting a fresh run", dir.string());
  return std::nullopt;
}

namespace {

// `--resume auto` before the first checkpoint: the run directory's saved config.json (the one a
// crashed first attempt wrote) is the base, as a checkpoint's would be; without it there is
// nothing to resume, which is said plainly instead of asking for --shards.
Config fresh_start_of_resumed_run(const Config& config, const ConfigOverBase& over) {
  const fs::path saved = fs::path(config.run.dir) / "config.json";
  if (fs::is_regular_file(saved)) {
    nlohmann::json base = read_json_file(saved.string());
    base.erase("_run");
    spdlog::info("train: no checkpoint yet; starting afresh from the saved config {}", saved.string());
    Config resolved = over(base);
    if (resolved.run.dir.empty()) resolved.run.dir = config.run.dir;
    return resolved;
  }
  if (config.data.shards.empty())
    throw UsageError("train: --resume auto: nothing to resume in " + config.run.dir +
                     " (no checkpoint and no config.json); start the run with --shards");
  return config;
}

}  // namespace

ResumeDecision decide_resume(const Config& config, std::string resume, const DistEnv& env, const ConfigOverBase& over) {
  if (env.restart_count > 0 && resume.empty()) resume = "auto";
  ResumeDecision decision{config, find_resume_checkpoint(config, resume)};
  if (decision.checkpoint) {
    // flashlight's rule: the saved config comes back, and this command line overrides it.
    decision.config = over(decision.checkpoint->state.at("config"));
    if (decision.config.run.dir.empty())
      decision.config.run.dir = decision.checkpoint->path.parent_path().parent_path().string();
  } else if (resume == "auto") {
    decision.config = fresh_start_of_resumed_run(config, over);
  }
  return decision;
}

TrainData open_train_data(Config& config) {
  return is_text_dataset(config.data.shards) ? open_text_data(config) : open_image_data(config);
}

void keep_global_batch(Config& config, const Checkpoint& checkpoint, int world) {
  const auto& position = checkpoint.state.at("position");
  const std::int64_t saved = position.value("global_batch", std::int64_t{0});
  const int saved_world = position.value("world_size", 1);
  const std::int64_t micro = config.loader.batch_size;
  const std::int64_t now = micro * config.train.accumulation_steps * world;
  if (saved <= 0 || saved == now) return;
  if (saved % (micro * world) != 0)
    throw ConfigError(
        fmt::format("the checkpoint was trained with a global batch of {} ({} ranks); {} ranks x micro-batch {} "
                    "cannot make it up with accumulation: choose loader.batch_size so that {} divides by "
                    "{} x batch",
                    saved, saved_world, world, micro, saved, world));
  const int accumulation = static_cast<int>(saved / (micro * world));
  spdlog::info("train: resuming a global batch of {} ({}) on {}: accumulation {} -> {}", saved,
               count_of(saved_world, "rank"), count_of(world, "rank"), config.train.accumulation_steps, accumulation);
  config.train.accumulation_steps = accumulation;
}

TrainJobResult run_train_job(TrainJob job) {
  Config& config = job.config;
  if (config.data.shards.empty()) throw UsageError("train: --shards (or data.shards) is required");
  if (!fs::is_directory(config.data.shards))
    throw UsageError("train: data.shards '" + config.data.shards + "' is not a folder of prepared shards");
  TrainData data = open_train_data(config);
  check_job(job);
  // Each local rank on its own GPU, before anything touches CUDA (the probe, the model, NCCL).
  if (wants_cuda(config.train.device)) bind_cuda_device(job.env);
  if (job.checkpoint) keep_global_batch(config, *job.checkpoint, job.env.world_size);
  // The budget stands in for the fleet's card: the allocator refuses beyond it for the whole run.
  std::unique_ptr<MemoryProbe> budget_guard;
  if (config.train.memory_budget.is_set()) {
    budget_guard = make_memory_probe(wants_cuda(config.train.device));
    budget_guard->set_budget(config.train.memory_budget.as_int64());
  }
  const int num_classes = static_cast<int>(data.class_names.size());
  std::optional<nlohmann::json> found_batch;
  if (config.loader.auto_batch) {
    cap_batch_search_at_samples(config, data.train->size(), job.env.world_size, "train");
    found_batch = find_the_batch(config, data, job.env, job.program);
  }
  std::string segment = segment_name(job.env);
  std::shared_ptr<ProcessGroup> group;
  // The group checks that every rank runs the same job before the plans, which may differ, are agreed.
  if (job.env.distributed()) group = join_group(job, segment);
  if (found_batch) {
    if (group) found_batch = agree_on_found_batch(*group, *found_batch);
    apply_found_batch(config, *found_batch);
  }
  const fs::path run_dir = open_job_run_dir(job);
  if (found_batch && job.env.rank == 0) write_file_atomic(run_dir / "find_batch.json", found_batch->dump(2) + "\n");
  seed_torch(static_cast<std::uint64_t>(config.run.seed));
  auto model = make_model(model_spec_from_config(config, num_classes));
  if (!config.model.pretrained.empty() && !job.checkpoint)
    load_weights_file(*model, config.model.pretrained, config.model.new_head, config.model.partial_load);
  Trainer trainer(config, model, data, run_dir, group, segment);
  if (auto hook = fault_hook(job.env)) trainer.set_after_step(hook);
  if (job.checkpoint) trainer.resume(*job.checkpoint);
  return {run_dir, trainer.fit()};
}

}  // namespace shoplens
