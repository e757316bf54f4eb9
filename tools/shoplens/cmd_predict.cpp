// `shoplens predict`: top-k predictions for a folder, CSV, list or one image (docs/SCORING.md).
#include <iostream>

#include "command.h"
#include "inference_flags.h"
#include "shoplens/core/logging.h"
#include "shoplens/core/runtime.h"
#include "shoplens/infer/predict.h"

namespace shoplens::cli {
namespace {

class PredictCommand : public Command {
 public:
  void setup(CLI::App& app) override {
    flags_.add_to(app);
    app.add_option("-i,--input", o_.input,
                   "a folder tree of images, a CSV (column path), a list file (.txt, one path per line), one image, "
                   "or prepared shards")
        ->required();
    app.add_option("-o,--out", o_.out, "predictions file (.csv or .jsonl)")->required();
    app.add_option("--format", o_.format, "csv, jsonl, or auto (from the --out extension)")
        ->check(CLI::IsMember({"auto", "csv", "jsonl"}));
    app.add_option("--root", o_.root, "CSV or list input: folder relative paths start from (empty: the file's folder)");
    app.add_option("--split", o_.split, "shards input: all, train, val or test");
    app.add_option("-k,--top-k", o_.top_k, "most probable classes written per row")->check(positive());
    app.add_flag("--logits", o_.logits, "also write every class's raw logit");
    app.add_option("-b,--batch-size", o_.batch_size, "images per forward pass")->check(positive());
    app.add_option("--workers", o_.workers, "decode threads (0: usable cores)")->check(thread_count());
    app.add_option("--threads", threads_, "compute threads (0: usable cores)")->check(thread_count());
    app.add_option("--log-level", log_level_, "trace, debug, info, warn or error");
  }

  int run() override {
    set_log_level(log_level_);
    set_compute_threads(threads_);
    o_.model = flags_.model_source();
    o_.inference = flags_.inference();
    const auto summary = run_predict(o_);
    std::cout << "predictions: " << summary["out"].get<std::string>() << " (" << summary["rows"] << " rows, "
              << summary["rows_error"] << " unreadable)" << std::endl;
    return 0;
  }

 private:
  InferenceFlags flags_;
  PredictOptions o_;
  int threads_ = 0;
  std::string log_level_ = "info";
};

}  // namespace

std::unique_ptr<Command> make_predict_command() { return std::make_unique<PredictCommand>(); }

}  // namespace shoplens::cli
