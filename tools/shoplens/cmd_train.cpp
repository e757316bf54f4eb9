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
    auto config = begin(options_);
    if (!config) return 0;
    ResumeDecision decision = decide_resume(*config, resume_, job.env,
                                            [this](const nlohmann::json& base) { return options_.resolve_over(base); });
    job.checkpoint = std::move(decision.checkpoint);
    config = std::move(decision.config);
    if (job.checkpoint) {  // the resumed config's logging and threads
      set_log_level(config->run.log_level);
      prefer_passive_openmp(gemm_bound_model(config->model.name), resolve_threads(config->run.threads),
                            config->model.name);  // a resumed model's name
      set_compute_threads(config->run.threads);
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
  ConfigOptions options_;
  std::string resume_;
};

}  // namespace

std::unique_ptr<Command> make_train_command() { return std::make_unique<TrainCommand>(); }

}  // namespace shoplens::cli
