// `shoplens bench-train`: the trainer's step on synthetic tensors, for side-by-side comparison
// with Python PyTorch (scripts/bench/train_step.sh; text models: scripts/bench/text_step.sh).
#include <cstdlib>
#include <iostream>

#include "command.h"
#include "shoplens/bench/train_bench.h"
#include "shoplens/core/runtime.h"
#include "shoplens/models/classifier.h"
#include "shoplens/models/model_facts.h"

namespace shoplens::cli {
namespace {

class BenchTrainCommand : public Command {
 public:
  void setup(CLI::App& app) override {
    app.add_option(
           "-m,--model", o_.model,
           "architecture: " + model_names_text(ModelInput::image) + "; text: " + model_names_text(ModelInput::tokens))
        ->type_name("NAME");
    app.add_option("-b,--batch-size", o_.batch_size, "batch size")->check(positive());
    app.add_option("--image-size", o_.image_size, "input side, pixels")->check(CLI::Range(8, 4096));
    classes_ = app.add_option("--num-classes", o_.num_classes, "classes of the head (text models: 2 unless given)")
                   ->check(positive());
    app.add_option("--seq-len", o_.seq_len, "text models: tokens per sequence, every one real (the worst case)")
        ->check(CLI::Range(1, 1 << 20));
    app.add_option("--vocab-size", o_.vocab_size, "text models: vocabulary of the synthetic token ids")
        ->check(CLI::Range(3, 1 << 24));
    app.add_option("--precision", precision_, "fp32, bf16 or fp16 (CUDA)")
        ->check(CLI::IsMember(names_of(kPrecisionNames)));
    app.add_flag("--channels-last", o_.channels_last, "channels-last memory format");
    app.add_option("--optimizer", optimizer_, "adamw or sgd")->check(CLI::IsMember(names_of(kOptimizerKindNames)));
    app.add_option("--optimizer-impl", optimizer_impl_,
                   "the optimizer step: auto (fused where LibTorch and the device have it, else foreach), fused, "
                   "foreach or reference (LibTorch's per-parameter loop), as train's optim.implementation")
        ->check(CLI::IsMember(names_of(kOptimizerImplNames)));
    app.add_option("--threads", o_.threads, "CPU threads (0: all usable cores)")->check(thread_count());
    app.add_option("--warmup-steps", o_.warmup_steps, "unmeasured steps first")->check(non_negative());
    add_old_spelling(app, "--warmup", o_.warmup_steps, "--warmup-steps")->check(non_negative());
    app.add_option("--steps", o_.steps, "measured steps")->check(positive());
    app.add_option("--timing", timing_,
                   "step: each step reads its loss and is timed alone (median: latency); window: the trainer's step "
                   "(loss kept on the device), the steps timed as one window until the device finished (mean: "
                   "throughput)")
        ->check(CLI::IsMember(names_of(kBenchTimingNames)));
    app.add_option("--seed", o_.seed, "seed of the weights and synthetic data");
    app.add_option("--bucket-mb", o_.bucket_mb, "under `shoplens launch`: gradient all-reduce bucket size, MB")
        ->check(positive());
    app.add_flag_callback(
        "--no-overlap", [this] { o_.overlap = false; },
        "under `shoplens launch`: all-reduce after backward (the baseline; default: overlapped with backward)");
    app.add_option("--format", format_, "table, json or csv")->check(CLI::IsMember({"table", "json", "csv"}));
  }

  int run() override {
    if (is_text_model(o_.model) && classes_->count() == 0) o_.num_classes = 2;
    o_.timing = parse_enum(kBenchTimingNames, timing_, "--timing");
    o_.precision = parse_enum(kPrecisionNames, precision_, "--precision");
    o_.optimizer = parse_enum(kOptimizerKindNames, optimizer_, "--optimizer");
    o_.optimizer_impl = parse_enum(kOptimizerImplNames, optimizer_impl_, "--optimizer-impl");
    prefer_passive_openmp(gemm_bound_model(o_.model), resolve_threads(o_.threads),
                          o_.model);  // measure what `train` runs
    const auto result = run_train_bench(o_);
    if (const char* rank = std::getenv("RANK"); rank && std::atoi(rank) != 0) return 0;  // rank 0 reports
    if (format_ == "json")
      std::cout << train_bench_json(result);
    else if (format_ == "csv")
      std::cout << train_bench_csv(result);
    else
      std::cout << train_bench_table(result);
    return 0;
  }

 private:
  TrainBenchOptions o_;
  std::string format_ = "table";
  // The enum-valued flags as typed, parsed into o_ in run().
  std::string timing_ = name_in(kBenchTimingNames, TrainBenchOptions{}.timing);
  std::string precision_ = precision_name(TrainBenchOptions{}.precision);
  std::string optimizer_ = name_in(kOptimizerKindNames, TrainBenchOptions{}.optimizer);
  std::string optimizer_impl_ = name_in(kOptimizerImplNames, TrainBenchOptions{}.optimizer_impl);
  CLI::Option* classes_ = nullptr;
};

}  // namespace

std::unique_ptr<Command> make_bench_train_command() { return std::make_unique<BenchTrainCommand>(); }

}  // namespace shoplens::cli
