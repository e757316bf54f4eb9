// `shoplens train`: trains a classifier on prepared shards, evaluates it, checkpoints, resumes.
#include <iostream>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "command.h"
#include "shoplens/batch/find_batch.h"
#include "shoplens/batch/memory_probe.h"
#include "shoplens/core/atomic_file.h"
#include "shoplens/core/strings.h"
#include "shoplens/core/logging.h"
#include "shoplens/core/run_dir.h"
#include "shoplens/core/runtime.h"
#include "shoplens/data/shards.h"
#include "shoplens/models/classifier.h"
#include "shoplens/models/weights.h"
#include "shoplens/train/checkpoint.h"
#include "shoplens/train/trainer.h"

namespace shoplens::cli {
namespace {

namespace fs = std::filesystem;

std::shared_ptr<const ImageSource> open_split(const std::string& shards, Split split) {
  auto dataset = ShardDataset::open(shards, split);
  if (dataset->size() == 0) {
    spdlog::warn("train: the {} split of {} is empty", split_name(split), shards);
    return nullptr;
  }
  return dataset;
}

class TrainCommand : public Command {
 public:
  void setup(CLI::App& app) override {
    options_.add_to(app);
    options_.add_flag_for(app, "-s,--shards", "data.shards", "prepared dataset folder");
    options_.add_flag_for(app, "-m,--model", "model.name",
                          "small_cnn, resnet18, resnet34, resnet50, vit_tiny, vit_small or vit_base");
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
    auto config = begin(options_);
    if (!config) return 0;

    std::optional<Checkpoint> checkpoint = find_checkpoint(*config);
    if (checkpoint) {
      // flashlight's rule: the saved config comes back, and this command line overrides it.
      config = options_.resolve_over(checkpoint->state.at("config"));
      set_log_level(config->run.log_level);
      set_compute_threads(config->run.threads);
      if (config->run.dir.empty()) config->run.dir = checkpoint->path.parent_path().parent_path().string();
    }
    if (config->data.shards.empty()) throw UsageError("train: --shards (or data.shards) is required");
    if (!fs::is_directory(config->data.shards))
      throw UsageError("train: data.shards '" + config->data.shards + "' is not a folder of prepared shards");

    TrainData data;
    data.train = open_split(config->data.shards, Split::kTrain);
    if (!data.train) throw DataError("train: " + config->data.shards + " has no training samples");
    data.val = open_split(config->data.shards, Split::kVal);
    data.test = open_split(config->data.shards, Split::kTest);
    data.class_names = static_cast<const ShardDataset&>(*data.train).info().classes;
    if (!config->data.classes.empty() && config->data.classes != data.class_names)
      throw ConfigError("data.classes " + nlohmann::json(config->data.classes).dump() + " differ from the shards' classes " +
                        nlohmann::json(data.class_names).dump());

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
    const fs::path run_dir = open_run_dir(*config, "train");
    if (found_batch) write_file_atomic(run_dir / "find_batch.json", found_batch->dump(2) + "\n");
    seed_torch(static_cast<std::uint64_t>(config->run.seed));
    auto model = make_model(model_spec_from_config(*config, static_cast<int>(data.class_names.size())));
    if (!config->model.pretrained.empty() && !checkpoint)
      load_weights_file(*model, config->model.pretrained, config->model.new_head);

    Trainer trainer(*config, model, data, run_dir);
    if (checkpoint) trainer.resume(*checkpoint);
    const auto summary = trainer.fit();
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

  ConfigOptions options_;
  std::string resume_;
};

}  // namespace

std::unique_ptr<Command> make_train_command() { return std::make_unique<TrainCommand>(); }

}  // namespace shoplens::cli
