// `shoplens find-batch`: the largest micro-batch of the configured job that fits the memory
// budget, by probing the real training step (docs/FIND_BATCH.md).
#include <iostream>

#include "command.h"
#include "shoplens/core/program_files.h"
#include "shoplens/core/atomic_file.h"
#include "shoplens/jobs/find_batch_job.h"

namespace shoplens::cli {
namespace {

class FindBatchCommand : public Command {
 public:
  void setup(CLI::App& app) override {
    options_.add_to(app);
    options_.add_flag_for(app, "-m,--model", "model.name", "architecture to size the batch for")->type_name("NAME");
    options_.add_flag_for(app, "--precision", "train.precision", "fp32, bf16 or fp16 (CUDA)");
    options_.add_flag_for(app, "--device", "train.device", "auto, cpu or cuda");
    options_.add_flag_for(app, "--image-size", "augment.image_size", "input side, pixels (the largest the job sees)");
    options_.add_flag_for(app, "--memory-budget", "train.memory_budget",
                          "device memory to fit in, e.g. 24GiB (empty: the device's free memory)");
    options_.add_flag_for(app, "--strategy", "find_batch.strategy",
                          "fit (memory model), binsearch (Lightning's, for comparison) or exact (true maximum, slow)");
    options_.add_flag_for(app, "--target-global-batch", "find_batch.target_global_batch",
                          "global batch to reach with accumulation (0: one micro-batch per step)");
    options_.add_flag_for(app, "--lr-scaling", "find_batch.lr_scaling", "linear, sqrt or none");
    options_.add_flag_for(app, "--max-batch", "find_batch.max_batch", "largest micro-batch considered");
    options_.add_flag_for(
        app, "-s,--shards", "data.shards",
        "prepared dataset: sizes the head by its classes; its loader's samples/s caps the throughput plan");
    classes_option_ = app.add_option("--classes", classes_,
                                     "classes of the head when neither --shards nor data.classes says (text models: 2)")
                          ->check(CLI::Range(2, 100000));
    app.add_option("--format", format_, "stdout: table, or json (for machines)")
        ->check(CLI::IsMember({"table", "json"}));
    add_old_flag(app, "--json", "--format json", [this] { format_ = "json"; });
    app.add_flag("--no-cache", no_cache_, "search again even when a cached answer exists (the new one is cached)");
    app.add_option("-o,--out", out_, "also write the JSON result to this file");
    // Internal: the fresh process of find_batch.process_check (one probe, its JSON to --out).
    app.add_option("--probe-process-at", probe_process_at_)->group("")->check(CLI::Range(1, 1 << 20));
  }

  int run() override {
    auto config = begin(options_);
    if (!config) return 0;
    FindBatchJob job{std::move(*config), classes_, classes_option_->count() > 0, !no_cache_, running_program()};
    if (probe_process_at_ > 0) {
      const auto probe = process_probe_to_json(run_process_probe_job(std::move(job), probe_process_at_));
      if (out_.empty())
        std::cout << probe.dump() << std::endl;
      else
        write_file_atomic(out_, probe.dump() + "\n");
      return 0;
    }
    const FindBatchResult result = run_find_batch_job(std::move(job));
    const auto doc = result.to_json();
    if (!out_.empty()) write_file_atomic(out_, doc.dump(2) + "\n");
    if (format_ == "json")
      std::cout << doc.dump(2) << std::endl;
    else
      std::cout << result.to_table() << std::flush;
    return 0;
  }

 private:
  ConfigOptions options_;
  int classes_ = 12;
  CLI::Option* classes_option_ = nullptr;
  std::string format_ = "table";
  bool no_cache_ = false;
  int probe_process_at_ = 0;
  std::string out_;
};

}  // namespace

std::unique_ptr<Command> make_find_batch_command() { return std::make_unique<FindBatchCommand>(); }

}  // namespace shoplens::cli
