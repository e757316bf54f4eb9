// `shoplens recommend`: projected time and cost of a full training run per hardware option, the
// Pareto set, a recommendation and a fallback with the reasoning (docs/COMPUTE.md).
#include <iostream>

#include "command.h"
#include "shoplens/bench/compute_plan.h"
#include "shoplens/bench/plan_report.h"
#include "shoplens/core/logging.h"

namespace shoplens::cli {
namespace {

class RecommendCommand : public Command {
 public:
  void setup(CLI::App& app) override {
    app.add_option("--bench", bench_files_, "bench result files, JSON lines (docs/COMPUTE.md); repeat for several")
        ->required()
        ->check(CLI::ExistingFile)
        ->type_name("FILE");
    app.add_option("--prices", prices_, "price table (\"shipped\": configs/prices.json, shipped with the program)")
        ->type_name("FILE");
    app.add_option("--scenario", request_.scenario, "scenario of the bench records to plan for");
    app.add_option("--dataset-size", request_.dataset_size, "images per epoch")->check(positive());
    app.add_option("--epochs", request_.epochs, "epochs per full run")->check(positive());
    app.add_option("--deadline", deadline_, "longest acceptable run, e.g. 8h, 90m, 2d (empty: none)");
    app.add_option("--budget", request_.budget, "most a run may cost, in the table's currency (0: none)")
        ->check(non_negative());
    app.add_option("--price-basis", basis_, "on-demand or spot prices")->check(CLI::IsMember({"on-demand", "spot"}));
    app.add_option(
        "--scaling", scaling_,
        "data-parallel efficiency overrides, DEVICES:EFFICIENCY,... (defaults 2:0.95,4:0.9,8:0.84,16:0.8,32:0.75)");
    app.add_option("--format", format_, "stdout: table, or json (for machines)")
        ->check(CLI::IsMember({"table", "json"}));
    add_old_flag(app, "--json", "--format json", [this] { format_ = "json"; });
    app.add_option("--log-level", log_level_, "trace, debug, info, warn or error");
  }

  int run() override {
    set_log_level(log_level_);
    if (!deadline_.empty()) request_.deadline_hours = parse_hours(deadline_);
    request_.basis = parse_price_basis(basis_);
    std::vector<ThroughputRecord> records;
    for (const auto& f : bench_files_) {
      auto more = load_bench_records(f);
      records.insert(records.end(), more.begin(), more.end());
    }
    const PriceTable prices = load_price_table(shipped_or(prices_, "configs/prices.json"));
    const Plan plan = plan_compute(records, prices, ScalingModel::parse(scaling_), request_);
    std::cout << (format_ == "json" ? plan_json(plan, request_, prices.currency)
                                    : plan_table(plan, request_, prices.currency))
              << std::flush;
    if (plan.recommended < 0) {
      // The constraints cannot be met: a failure the caller must see (exit 1), with the why.
      throw Error("recommend: " + plan.reasoning.back());
    }
    return 0;
  }

 private:
  std::vector<std::string> bench_files_;
  std::string prices_ = kShipped;
  PlanRequest request_{"baseline_cnn", 1200000, 30, 0, 0, PriceBasis::kOnDemand};
  std::string deadline_;
  std::string basis_ = to_string(PriceBasis::kOnDemand);
  std::string scaling_;
  std::string format_ = "table";
  std::string log_level_ = "info";
};

}  // namespace

std::unique_ptr<Command> make_recommend_command() { return std::make_unique<RecommendCommand>(); }

}  // namespace shoplens::cli
