// `shoplens evaluate`: accuracy, top-5, macro-F1, per-class metrics, confusion matrix and
// calibration of a model on labelled images (docs/SCORING.md).
#include <iostream>

#include <fmt/format.h>

#include "command.h"
#include "inference_flags.h"
#include "shoplens/infer/predict.h"
#include "shoplens/core/plural.h"

namespace shoplens::cli {
namespace {

class EvaluateCommand : public Command {
 public:
  void setup(CLI::App& app) override {
    flags_.add_to(app, o_);
    app.add_option("-i,--input", o_.input,
                   "labelled images: a class-folder tree, a CSV with path and label columns, or prepared shards")
        ->required();
    app.add_option("-o,--out", o_.out_dir, "output folder: metrics.json, report.html, predictions.csv")->required();
    app.add_option("--calibration-bins", o_.calibration_bins, "equal-width confidence bins of the ECE")
        ->check(CLI::Range(1, 1000));
  }

  int run() override {
    flags_.apply(o_);
    const auto m = run_evaluate(o_);
    std::cout << fmt::format("accuracy {:.4f}  top-{} {:.4f}  macro-F1 {:.4f}  ECE {:.4f}  ({})\n", m.report.accuracy,
                             m.top_k, m.top_k_accuracy, m.report.macro_f1, m.ece, count_of(m.report.samples, "sample"))
              << "metrics: " << (o_.out_dir / "metrics.json").string() << "\n"
              << "report: " << (o_.out_dir / "report.html").string() << std::endl;
    return 0;
  }

 private:
  InferenceFlags flags_;
  EvaluateOptions o_;
};

}  // namespace

std::unique_ptr<Command> make_evaluate_command() { return std::make_unique<EvaluateCommand>(); }

}  // namespace shoplens::cli
