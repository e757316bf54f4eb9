// `shoplens export`: a trained run -> a verified, self-describing model folder (docs/SCORING.md).
#include <iostream>

#include "command.h"
#include "shoplens/core/logging.h"
#include "shoplens/core/strings.h"
#include "shoplens/infer/latency_curve.h"
#include "shoplens/infer/model_export.h"

namespace shoplens::cli {
namespace {

constexpr double kLongestTargetMs = 3600000;  // an hour, as serve's timeouts

class ExportCommand : public Command {
 public:
  void setup(CLI::App& app) override {
    app.add_option("-r,--run", o_.run_dir, "run directory of `shoplens train` (required unless --check)");
    app.add_option("-o,--out", o_.out_dir,
                   "model folder to write (must not exist unless --force); with --format triton, the Triton model "
                   "repository that receives <name>/")
        ->required();
    app.add_option("--format", format_,
                   "folder (safetensors + card), onnx (the folder plus model.onnx; a text run: model.onnx only) or "
                   "triton (a Triton model repository)")
        ->check(CLI::IsMember({"folder", "onnx", "triton"}));
    app.add_option("--triton-name", o_.triton_name,
                   "triton: the model's folder in the repository (empty: the architecture name)");
    app.add_option("--max-batch", o_.max_batch,
                   "triton: max_batch_size, and the largest batch timed for the batching, 1 to " +
                       std::to_string(kMaxLatencyCurveBatch))
        ->check(finite_between(1, kMaxLatencyCurveBatch));
    app.add_option("--p95-target-ms", o_.p95_target_ms,
                   "triton: latency budget; the preferred batch is the largest whose measured p95 fits it (as serve), "
                   "0 to 3600000 ms")
        ->check(finite_between(0, kLongestTargetMs));
    app.add_option("--warmup-reps", o_.warmup_reps,
                   "triton: timed passes per batch size, 1 to " + std::to_string(kMaxLatencyCurveReps))
        ->check(finite_between(1, kMaxLatencyCurveReps));
    app.add_option("--checkpoint", o_.checkpoint, "best, last, or a checkpoint file");
    ema_option_ = app.add_option("--ema", ema_,
                                 "export the checkpoint's EMA weights: auto (when the run kept them, train.ema_decay "
                                 "> 0), on, or off (the raw weights)")
                      ->check(CLI::IsMember({"auto", "on", "off"}));
    weights_option_ = add_old_spelling(app, "--weights", old_weights_, "--ema auto|on|off")
                          ->check(CLI::IsMember({"auto", "ema", "raw"}));
    app.add_option("--variants", variants_, "reduced-precision copies of the weights: bf16, fp16 or bf16,fp16");
    app.add_flag("--force", o_.force, "replace an existing model folder (only once the new one is verified)");
    app.add_flag("--check", check_only_,
                 "only verify an existing model folder given by --out (files, checksums, logits)");
    app.add_option("--log-level", log_level_, "trace, debug, info, warn or error");
  }

  int run() override {
    set_log_level(log_level_);
    if (check_only_) {
      const ModelCard card = verify_exported_model(o_.out_dir);
      std::cout << o_.out_dir.string() << ": verified (" << card.architecture << ", " << card.class_names.size()
                << " classes)" << std::endl;
      return 0;
    }
    if (o_.run_dir.empty()) throw UsageError("export: --run RUN_DIR is required (or --check to verify --out)");
    o_.format = parse_enum(kExportFormatNames, format_, "--format");
    if (weights_option_->count() > 0) o_.weights = parse_enum(kExportWeightsNames, old_weights_, "--weights");
    if (ema_option_->count() > 0) o_.weights = parse_enum(kEmaFlagNames, ema_, "--ema");
    for (const auto& part : split(variants_, ','))
      if (!trim(part).empty()) o_.variants.emplace_back(trim(part));
    print_export(export_model(o_));
    return 0;
  }

 private:
  static void print_export(const ExportResult& result) {
    switch (result.artifact) {
      case ExportedArtifact::kTritonModel:
        std::cout << "triton repository: " << result.out_dir.string() << " (model " << result.triton_model << ")"
                  << std::endl;
        return;
      case ExportedArtifact::kTextOnnx:
        std::cout << "onnx: " << result.onnx_file.string() << std::endl;
        return;
      case ExportedArtifact::kModelFolder:
        std::cout << "model folder: " << result.out_dir.string() << "\n"
                  << "card: " << result.card_file.string() << std::endl;
        if (!result.onnx_file.empty()) std::cout << "onnx: " << result.onnx_file.string() << std::endl;
        return;
    }
  }

  ExportOptions o_;
  std::string format_ = "folder";
  std::string old_weights_ = "auto";
  CLI::Option* weights_option_ = nullptr;
  std::string variants_;
  std::string ema_ = "auto";
  CLI::Option* ema_option_ = nullptr;
  std::string log_level_ = "info";
  bool check_only_ = false;
};

}  // namespace

std::unique_ptr<Command> make_export_command() { return std::make_unique<ExportCommand>(); }

}  // namespace shoplens::cli
