// `shoplens load`: runs the training loader over prepared shards (image or text), checks that
// every sample of the split is delivered once per epoch, and reports throughput, time spent
// waiting and, for text, the padding fraction.
#include <iostream>

#include <nlohmann/json.hpp>

#include "command.h"
#include "shoplens/core/atomic_file.h"
#include "shoplens/core/run_dir.h"
#include "shoplens/data/load_check.h"

namespace shoplens::cli {
namespace {

class LoadCommand : public Command {
 public:
  void setup(CLI::App& app) override {
    options_.add_to(app);
    options_.add_flag_for(app, "-s,--shards", "data.shards", "prepared dataset folder (image or text shards)");
    options_.add_flag_for(app, "-b,--batch-size", "loader.batch_size", "samples per batch");
    options_.add_flag_for(app, "--workers", "loader.workers", "decode threads (0: run.threads)");
    options_.add_flag_for(app, "-o,--out", "run.dir", "run directory for load.json and the log");
    app.add_option("--split", split_, "split to read: train, val or test");
    app.add_option("--epochs", check_.epochs, "epochs to run")->check(positive());
    app.add_flag("--eval", check_.eval, "use the evaluation transform instead of training augmentation");
    app.add_flag("--verify", check_.verify, "check every shard's data checksum before loading");
    app.add_option("--preview", check_.preview, "write a PNG grid of the first batch's augmented images");
  }

  int run() override {
    auto config = begin(options_);
    if (!config) return 0;
    if (config->data.shards.empty()) throw UsageError("load: --shards (or data.shards) is required");
    const auto split = parse_split(split_);
    if (!split) throw UsageError("load: --split '" + split_ + "' is not train, val or test");
    check_.split = *split;
    const auto run_dir = open_run_dir(*config, "load");
    const nlohmann::json result = run_load_check(*config, check_).to_json();
    write_file_atomic(run_dir / "load.json", result.dump(2) + "\n");
    std::cout << result.dump(2) << std::endl;
    return 0;
  }

 private:
  ConfigOptions options_;
  std::string split_ = "train";
  LoadCheckOptions check_;
};

}  // namespace

std::unique_ptr<Command> make_load_command() { return std::make_unique<LoadCommand>(); }

}  // namespace shoplens::cli
