// `shoplens predict`: top-k predictions for a folder, CSV, list or one image (docs/SCORING.md).
#include <iostream>

#include "command.h"
#include "inference_flags.h"
#include "shoplens/infer/predict.h"

namespace shoplens::cli {
namespace {

class PredictCommand : public Command {
 public:
  void setup(CLI::App& app) override {
    flags_.add_to(app, o_);
    app.add_option("-i,--input", o_.input,
                   "a folder tree of images, a CSV (column path), a list file (.txt, one path per line), one image, "
                   "or prepared shards")
        ->required();
    app.add_option("-o,--out", o_.out, "predictions file (.csv or .jsonl)")->required();
    app.add_option("--format", format_, "csv, jsonl, or auto (from the --out extension)")
        ->check(CLI::IsMember({"auto", "csv", "jsonl"}));
    app.add_option("-k,--top-k", o_.top_k, "most probable classes written per row")->check(positive());
    app.add_flag("--logits", o_.logits, "also write every class's raw logit");
  }

  int run() override {
    flags_.apply(o_);
    o_.format = parse_enum(kPredictionFormatNames, format_, "--format");
    const PredictSummary summary = run_predict(o_);
    std::cout << "predictions: " << summary.out.string() << " (" << summary.rows << " rows, " << summary.rows_error
              << " unreadable)" << std::endl;
    return 0;
  }

 private:
  InferenceFlags flags_;
  PredictOptions o_;
  std::string format_ = name_in(kPredictionFormatNames, PredictOptions{}.format);
};

}  // namespace

std::unique_ptr<Command> make_predict_command() { return std::make_unique<PredictCommand>(); }

}  // namespace shoplens::cli
