// `shoplens verify-ledger RUN_DIR`: proves from the sample ledger that every training sample was
// used exactly once per epoch, across restarts and world-size changes (docs/DISTRIBUTED.md).
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "command.h"
#include "shoplens/core/logging.h"
#include "shoplens/data/open_dataset.h"
#include "shoplens/dist/ledger.h"

namespace shoplens::cli {
namespace {

namespace fs = std::filesystem;

class VerifyLedgerCommand : public Command {
 public:
  void setup(CLI::App& app) override {
    app.add_option("run_dir", run_dir_, "run directory of a `shoplens train --set dist.ledger=true` run")->required();
    app.add_option("--shards", shards_,
                   "prepared dataset whose train split is checked (default: the run's data.shards)");
    app.add_flag("--json", as_json_, "print the report as JSON");
    app.add_option("--log-level", log_level_, "trace, debug, info, warn or error");
  }

  int run() override {
    set_log_level(log_level_);
    std::string shards = shards_;
    if (shards.empty()) {
      const fs::path config_file = run_dir_ / "config.json";
      std::ifstream in(config_file);
      if (!in)
        throw IoError("verify-ledger: cannot read " + config_file.string() + " (is " + run_dir_.string() +
                      " a run directory?)");
      nlohmann::json config;
      try {
        config = nlohmann::json::parse(in);
        shards = config.at("data").at("shards").get<std::string>();
      } catch (const std::exception& e) {
        throw DataError("verify-ledger: " + config_file.string() + ": no data.shards (" + e.what() +
                        "); pass --shards");
      }
    }
    // Image or text shards alike: the ledger speaks of sample ids only.
    const std::shared_ptr<const SampleSource> train = open_split(shards, Split::kTrain).source;
    std::vector<std::uint64_t> ids;
    ids.reserve(train->size());
    for (std::size_t i = 0; i < train->size(); ++i) ids.push_back(train->sample_id(i));
    const auto report = verify_ledger(read_ledger_files(run_dir_), ids);
    if (as_json_)
      std::cout << report.to_json().dump(2) << std::endl;
    else
      std::cout << report.to_text();
    return report.exact() ? 0 : static_cast<int>(ExitCode::kFailure);
  }

 private:
  fs::path run_dir_;
  std::string shards_;
  bool as_json_ = false;
  std::string log_level_ = "info";
};

}  // namespace

std::unique_ptr<Command> make_verify_ledger_command() { return std::make_unique<VerifyLedgerCommand>(); }

}  // namespace shoplens::cli
