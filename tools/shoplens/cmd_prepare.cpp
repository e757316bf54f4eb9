// `shoplens prepare`: manifest or ImageFolder in, checksummed shards and a report out.
#include <iostream>

#include "command.h"
#include "shoplens/core/run_dir.h"
#include "shoplens/data/prepare.h"

namespace shoplens::cli {
namespace {

class PrepareCommand : public Command {
 public:
  void setup(CLI::App& app) override {
    options_.add_to(app);
    options_.add_flag_for(app, "-i,--input", "data.input", "CSV manifest or ImageFolder root");
    options_.add_flag_for(app, "-o,--out", "data.shards", "output folder for shards and the report");
    options_.add_flag_for(app, "--root", "data.root", "base folder for relative manifest paths");
    options_.add_flag_for(app, "--storage-size", "data.storage_size", "short side of stored images");
    options_.add_flag_for(app, "--encoding", "data.encoding", "shard payload: jpeg or raw");
    options_.add_flag_for(app, "--jpeg-quality", "data.jpeg_quality", "quality of stored JPEGs");
    options_.add_flag_for(app, "--records-per-shard", "data.records_per_shard", "images per shard");
  }

  int run() override {
    auto config = begin(options_);
    if (!config) return 0;
    PrepareOptions prepare = prepare_options_from_config(*config);
    if (prepare.input.empty()) throw UsageError("prepare: --input (or data.input) is required");
    if (prepare.out_dir.empty()) throw UsageError("prepare: --out (or data.shards) is required");
    check_prepare_paths(prepare);  // before the output folder gets config.json and the log
    open_run_dir(*config, "prepare", prepare.out_dir);
    PrepareReport report = prepare_dataset(prepare);
    std::cout << format_prepare_summary(report, prepare.out_dir);  // the whole report is report.md
    return 0;
  }

 private:
  ConfigOptions options_;
};

}  // namespace

std::unique_ptr<Command> make_prepare_command() { return std::make_unique<PrepareCommand>(); }

}  // namespace shoplens::cli
