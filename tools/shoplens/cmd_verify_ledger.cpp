// `shoplens verify-ledger RUN_DIR`: proves from the sample ledger that every training sample was
// used exactly once per epoch, across restarts and world-size changes (docs/DISTRIBUTED.md).
#include <iostream>

#include <nlohmann/json.hpp>

#include "command.h"
#include "shoplens/core/logging.h"
#include "shoplens/jobs/ledger_check.h"

namespace shoplens::cli {
namespace {

namespace fs = std::filesystem;

class VerifyLedgerCommand : public Command {
 public:
  void setup(CLI::App& app) override {
    app.add_option("run_dir", run_dir_, "run directory of a `shoplens train --set dist.ledger=true` run")->required();
    app.add_option("--shards", shards_,
                   "prepared dataset whose train split is checked (default: the run's data.shards)");
    app.add_option("--format", format_, "stdout: text, or json (for machines)")->check(CLI::IsMember({"text", "json"}));
    add_old_flag(app, "--json", "--format json", [this] { format_ = "json"; });
    app.add_option("--log-level", log_level_, "trace, debug, info, warn or error");
  }

  int run() override {
    set_log_level(log_level_);
    const auto report = verify_run_ledger(run_dir_, shards_);
    if (format_ == "json")
      std::cout << report.to_json().dump(2) << std::endl;
    else
      std::cout << report.to_text();
    return report.exact() ? 0 : static_cast<int>(ExitCode::kFailure);
  }

 private:
  fs::path run_dir_;
  fs::path shards_;
  std::string format_ = "text";
  std::string log_level_ = "info";
};

}  // namespace

std::unique_ptr<Command> make_verify_ledger_command() { return std::make_unique<VerifyLedgerCommand>(); }

}  // namespace shoplens::cli
