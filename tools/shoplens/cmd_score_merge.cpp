// `shoplens score-merge OUT`: verifies and joins the shards of a sharded score job (docs/SCORING.md).
#include <iostream>

#include "command.h"
#include "shoplens/core/logging.h"
#include "shoplens/infer/score_merge.h"

namespace shoplens::cli {
namespace {

class ScoreMergeCommand : public Command {
 public:
  void setup(CLI::App& app) override {
    app.add_option("jobs", o_.jobs,
                   "score's --out folder(s) holding shard-IIIII-of-NNNNN folders, or the shard folders themselves")
        ->required();
    app.add_option("-o,--out", o_.out_dir, "where predictions.csv and report.json go (empty: the first folder given)");
    app.add_option("-i,--input", o_.input,
                   "the input the shards scored: check each shard's rows fingerprint against it (empty: not checked)");
    app.add_option("--root", o_.root, "with --input: as score's --root (empty: the file's folder)");
    app.add_option("--split", o_.split, "with --input of shards: all, train, val or test");
    app.add_option("--price-per-hour", o_.price_per_hour,
                   "device price per hour for the cost per million images (0: the price the shards recorded)")
        ->check(non_negative());
    app.add_option("--log-level", log_level_, "trace, debug, info, warn or error");
  }

  int run() override {
    set_log_level(log_level_);
    const auto report = merge_score_shards(o_);
    const std::filesystem::path out = o_.out_dir.empty() ? o_.jobs.front() : o_.out_dir;
    std::cout << "predictions: " << (out / "predictions.csv").string() << "\n"
              << "report: " << (out / "report.json").string() << std::endl;
    return 0;
  }

 private:
  ScoreMergeOptions o_;
  std::string log_level_ = "info";
};

}  // namespace

std::unique_ptr<Command> make_score_merge_command() { return std::make_unique<ScoreMergeCommand>(); }

}  // namespace shoplens::cli
