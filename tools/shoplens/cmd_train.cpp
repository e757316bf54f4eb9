// `shoplens train`: trains a classifier on prepared shards, evaluates it, checkpoints, resumes.
#include <csignal>
#include <cstdlib>
#include <iostream>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "command.h"
#include "shoplens/batch/find_batch.h"
#include "shoplens/batch/memory_probe.h"
#include "shoplens/core/atomic_file.h"
#include "shoplens/core/hash.h"
#include "shoplens/core/strings.h"
#include "shoplens/core/logging.h"
#include "shoplens/core/run_dir.h"
#include "shoplens/core/runtime.h"
#include "shoplens/data/shards.h"
#include "shoplens/data/text_task.h"
#include "shoplens/dist/dist_env.h"
#include "shoplens/dist/process_group.h"
#include "shoplens/models/classifier.h"
#include "shoplens/models/weights.h"
#include "shoplens/train/checkpoint.h"
#include "shoplens/train/trainer.h"

namespace shoplens::cli {
namespace {

namespace fs = std::filesystem;

template <class Source>
std::shared_ptr<const SampleSource> non_empty(std::shared_ptr<const Source> split, const std::string& shards, Split which) {
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
    throw ConfigError("data.classes " + nlohmann::json(config.data.classes).dump() + " differ from the shards' classes " +
                      nlohmann::json(data.class_names).dump());
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

// A resumed run keeps its global batch, so that its position in the epoch's order stays exact:
// on another world size the accumulation makes up the difference (elastic resume).
void keep_global_batch(Config& config, const Checkpoint& checkpoint, int world) {
  const auto& position = checkpoint.state.at("position");
  const std::int64_t saved = position.value("global_batch", std::int64_t{0});
  const int saved_world = position.value("world_size", 1);
  const std::int64_t micro = config.loader.batch_size;
  const std::int64_t now = micro * config.train.accumulation_steps * world;
  if (saved <= 0 || saved == now) return;
  if (saved % (micro * world) != 0)
    throw ConfigError(fmt::format("the checkpoint was trained with a global batch of {} ({} ranks); {} ranks x micro-batch {} "
                                  "cannot make it up with accumulation: choose loader.batch_size so that {} divides by "
                                  "{} x batch",
                                  saved, saved_world, world, micro, saved, world));
  const int accumulation = static_cast<int>(saved / (micro * world));
  spdlog::info("train: resuming a global batch of {} ({} ranks) on {} rank(s): accumulation {} -> {}", saved, saved_world,
               world, config.train.accumulation_steps, accumulation);
  config.train.accumulation_steps = accumulation;
}

// Fault injection for the tests (docs/DISTRIBUTED.md): SHOPLENS_FAULT_KILL_STEP=N with
// SHOPLENS_FAULT_KILL_RANK=R kills rank R with SIGKILL right after step N, on the first attempt
// only (a restarted job runs clean).
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

class TrainCommand : public Command {
 public:
  void setup(CLI::App& app) override {
    options_.add_to(app);
    options_.add_flag_for(app, "-s,--shards", "data.shards", "prepared dataset folder (image shards, or text shards)");
    options_.add_flag_for(app, "-m,--model", "model.name",
                          "small_cnn, resnet18, resnet34, resnet50, vit_tiny, vit_small, vit_base; text: text_tiny, "
                          "text_small, text_base");
    options_.add_flag_for(app, "--pretrained", "model.pretrained", "starting weights (.safetensors or torch.save)");
    options_.add_flag_for(app, "--epochs", "train.epochs", "epochs to train");
    options_.add_flag_for(app, "--max-steps", "train.max_steps", "stop after this many optimizer steps (0: no limit)");
    options_.add_flag_for(app, "-b,--batch-size", "loader.batch_size",
                          "micro-batch size, or 'auto': the largest that fits (find-batch runs first)");
    options_.add_flag_for(app, "--memory-budget", "train.memory_budget",
                          "device memory the job may use, e.g. 24GiB (empty: no cap)");
    options_.add_flag_for(app, "--accumulation", "train.accumulation_steps", "micro-batches per optimizer step");
    options_.add_flag_for(app, "--lr", "optim.lr", "peak learning rate");
    options_.add_flag_for(app, "--precision", "train.precision", "fp32, bf16 or fp16 (CUDA)");
    options_.add_flag_for(app, "--device", "train.device", "auto, cpu or cuda");
    options_.add_flag_for(app, "-o,--out", "run.dir", "run directory (checkpoints, metrics, summary.json)");
    app.add_option("--resume", resume_,
                   "continue a run: 'auto' (newest valid checkpoint in the run directory, or a fresh start when there "
                   "is none) or a checkpoint file; its saved config is the base the options above override");
  }

  int run() override {
    const DistEnv env = dist_env_from_process();
    // torchrun's contract: a restarted worker picks up from the latest checkpoint.
    if (env.restart_count > 0 && resume_.empty()) resume_ = "auto";
    auto config = begin(options_);
    if (!config) return 0;

    std::optional<Checkpoint> checkpoint = find_checkpoint(*config);
    if (checkpoint) {
      // flashlight's rule: the saved config comes back, and this command line overrides it.
      config = options_.resolve_over(checkpoint->state.at("config"));
      set_log_level(config->run.log_level);
      prefer_passive_openmp(config->model.name, resolve_threads(config->run.threads));  // a resumed model's name
      set_compute_threads(config->run.threads);
      if (config->run.dir.empty()) config->run.dir = checkpoint->path.parent_path().parent_path().string();
    } else if (resume_ == "auto") {
      config = fresh_start_of_resumed_run(*config);
    }
    if (config->data.shards.empty()) throw UsageError("train: --shards (or data.shards) is required");
    if (!fs::is_directory(config->data.shards))
      throw UsageError("train: data.shards '" + config->data.shards + "' is not a folder of prepared shards");

    TrainData data = is_text_dataset(config->data.shards) ? open_text_data(*config) : open_image_data(*config);
    if (env.distributed() && config->run.dir.empty())
      throw UsageError("train: a distributed run needs --out (run.dir): every rank writes into the same run directory");
    if (checkpoint) keep_global_batch(*config, *checkpoint, env.world_size);
    const fs::path existing = fs::path(config->run.dir) / "checkpoints";
    if (!checkpoint && !config->run.dir.empty() && fs::is_directory(existing) && !CheckpointStore(existing, 1).list().empty())
      throw UsageError("train: " + config->run.dir + " already holds checkpoints of a run; continue it with --resume auto, "
                       "or choose another --out");
    // The budget stands in for the fleet's card: the allocator refuses beyond it for the whole run.
    std::unique_ptr<MemoryProbe> budget_guard;
    if (!config->train.memory_budget.empty()) {
      budget_guard = make_memory_probe(wants_cuda(config->train.device));
      budget_guard->set_budget(static_cast<std::int64_t>(parse_bytes(config->train.memory_budget, "train.memory_budget")));
    }
    std::optional<nlohmann::json> found_batch;
    if (config->loader.auto_batch) {
      const FindBatchResult found = find_batch(*config, static_cast<int>(data.class_names.size()), /*use_cache=*/true);
      apply_plan(*config, found.plan);
      spdlog::info("train: loader.batch_size auto: micro-batch {} x {} accumulation, lr {:.4g} ({} probes{})",
                   found.plan.micro_batch, found.plan.accumulation_steps, found.plan.lr, found.search.at("probes").size(),
                   found.from_cache ? ", cached" : "");
      found_batch = found.to_json();
    }
    std::shared_ptr<ProcessGroup> group;
    std::string segment = fmt::format("seg-{}-{}", env.restart_count, std::chrono::duration_cast<std::chrono::milliseconds>(
                                                                          std::chrono::system_clock::now().time_since_epoch())
                                                                          .count());
    if (env.distributed()) {
      GroupOptions group_options;
      group_options.backend = config->dist.backend == "auto" ? (wants_cuda(config->train.device) ? "nccl" : "gloo")
                                                             : config->dist.backend;
      group_options.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(config->dist.timeout_seconds * 1000));
      // Every rank must run the same job from the same checkpoint.
      group_options.fingerprint = Fingerprint()
                                      .add(config_to_json(*config).dump())
                                      .add(checkpoint ? checkpoint->path.filename().string() : std::string("fresh"))
                                      .hex();
      group = join_process_group(env, group_options);
      segment = group->all_gather_string("segment", segment).front();  // rank 0's name for this start
      if (found_batch) {
        const auto batches = group->all_gather_string("micro_batch", std::to_string(config->loader.batch_size));
        for (const auto& b : batches)
          if (b != batches.front())
            throw ConfigError("train: the ranks' batch searches found different micro-batches (" + join(batches, ", ") +
                              "); set loader.batch_size explicitly");
      }
    }
    fs::path run_dir;
    if (env.rank == 0) {
      run_dir = open_run_dir(*config, "train");
    } else {
      run_dir = config->run.dir;
      fs::create_directories(run_dir / "logs");
    }
    if (env.distributed()) {
      add_log_file(run_dir / "logs" / fmt::format("rank-{}.log", env.rank));
      if (env.rank > 0) set_console_level("warn");
    }
    if (found_batch && env.rank == 0) write_file_atomic(run_dir / "find_batch.json", found_batch->dump(2) + "\n");
    seed_torch(static_cast<std::uint64_t>(config->run.seed));
    auto model = make_model(model_spec_from_config(*config, static_cast<int>(data.class_names.size())));
    if (!config->model.pretrained.empty() && !checkpoint)
      load_weights_file(*model, config->model.pretrained, config->model.new_head, config->model.partial_load);

    Trainer trainer(*config, model, data, run_dir, group, segment);
    if (auto hook = fault_hook(env)) trainer.set_after_step(hook);
    if (checkpoint) trainer.resume(*checkpoint);
    const auto summary = trainer.fit();
    if (env.rank == 0)
      std::cout << "run directory: " << run_dir.string() << "\n"
                << "summary: " << (run_dir / "summary.json").string() << std::endl;
    return 0;
  }

 private:
  std::optional<Checkpoint> find_checkpoint(const Config& config) {
    if (resume_.empty()) return std::nullopt;
    if (resume_ != "auto") return read_checkpoint(resume_);  // an unreadable file given by name is an error
    if (config.run.dir.empty())
      throw UsageError("train: --resume auto needs the run directory (--out or run.dir) to look for checkpoints in");
    const fs::path dir = fs::path(config.run.dir) / "checkpoints";
    if (!fs::is_directory(dir)) {
      spdlog::info("train: no checkpoints in {} yet; starting a fresh run", dir.string());
      return std::nullopt;
    }
    auto found = CheckpointStore(dir, config.train.keep_last).newest_valid();
    if (!found) spdlog::warn("train: no valid checkpoint in {}; starting a fresh run", dir.string());
    return found;
  }

  // `--resume auto` before the first checkpoint: the run directory's saved config.json (the one a
  // crashed first attempt wrote) is the base, as a checkpoint's would be; without it there is
  // nothing to resume, which is said plainly instead of asking for --shards.
  Config fresh_start_of_resumed_run(const Config& config) {
    const fs::path saved = fs::path(config.run.dir) / "config.json";
    if (fs::is_regular_file(saved)) {
      nlohmann::json base = read_json_file(saved.string());
      base.erase("_run");
      spdlog::info("train: no checkpoint yet; starting afresh from the saved config {}", saved.string());
      Config resolved = options_.resolve_over(base);
      if (resolved.run.dir.empty()) resolved.run.dir = config.run.dir;
      return resolved;
    }
    if (config.data.shards.empty())
      throw UsageError("train: --resume auto: nothing to resume in " + config.run.dir +
                       " (no checkpoint and no config.json); start the run with --shards");
    return config;
  }

  ConfigOptions options_;
  std::string resume_;
};

}  // namespace

std::unique_ptr<Command> make_train_command() { return std::make_unique<TrainCommand>(); }

}  // namespace shoplens::cli
