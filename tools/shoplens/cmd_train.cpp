// `shoplens train`: trains a classifier on prepared shards, evaluates it, checkpoints, resumes.
#include <iostream>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "command.h"
#include "shoplens/core/program_files.h"
#include "shoplens/core/logging.h"
#include "shoplens/core/runtime.h"
#include "shoplens/dist/dist_env.h"
#include "shoplens/jobs/train_job.h"
#include "shoplens/models/classifier.h"
#include "shoplens/train/checkpoint.h"

namespace shoplens::cli {
namespace {

namespace fs = std::filesystem;

class TrainCommand : public Command {
 public:
  void setup(CLI::App& app) override {
    options_.add_to(app);
    options_.add_flag_for(app, "-s,--shards", "data.shards", "prepared dataset folder (image shards, or text shards)");
    options_
        .add_flag_for(
            app, "-m,--model", "model.name",
            "architecture: " + model_names_text(ModelInput::image) + "; text: " + model_names_text(ModelInput::tokens))
        ->type_name("NAME");
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
    TrainJob job;
    job.env = dist_env_from_process();
    // torchrun's contract: a restarted worker picks up from the latest checkpoint.
    if (job.env.restart_count > 0 && resume_.empty()) resume_ = "auto";
    auto config = begin(options_);
    if (!config) return 0;
    job.checkpoint = find_resume_checkpoint(*config, resume_);
    if (job.checkpoint) {
      // flashlight's rule: the saved config comes back, and this command line overrides it.
      config = options_.resolve_over(job.checkpoint->state.at("config"));
      set_log_level(config->run.log_level);
      prefer_passive_openmp(gemm_bound_model(config->model.name), resolve_threads(config->run.threads),
                            config->model.name);  // a resumed model's name
      set_compute_threads(config->run.threads);
      if (config->run.dir.empty()) config->run.dir = job.checkpoint->path.parent_path().parent_path().string();
    } else if (resume_ == "auto") {
      config = fresh_start_of_resumed_run(*config);
    }
    job.config = std::move(*config);
    job.program = running_program();
    const int rank = job.env.rank;
    const TrainJobResult result = run_train_job(std::move(job));
    if (rank == 0)
      std::cout << "run directory: " << result.run_dir.string() << "\n"
                << "summary: " << (result.run_dir / "summary.json").string() << std::endl;
    return 0;
  }

 private:
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
