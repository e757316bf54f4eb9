// `shoplens recommend`: projected time and cost of a full training run per hardware option, the
// Pareto set, a recommendation and a fallback with the reasoning (docs/COMPUTE.md).
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "command.h"
#include "shoplens/bench/compute_plan.h"
#include "shoplens/core/logging.h"

namespace shoplens::cli {
namespace {

class RecommendCommand : public Command {
 public:
  void setup(CLI::App& app) override {
    app.add_option("--bench", bench_files_, "bench result files, JSON lines (docs/COMPUTE.md); repeat for several")
        ->required()
        ->check(CLI::ExistingFile);
    app.add_option("--prices", prices_, "price table")->check(CLI::ExistingFile);
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
    app.add_flag("--json", json_, "print the plan as JSON instead of a table");
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
    const PriceTable prices = load_price_table(prices_);
    const Plan plan = plan_compute(records, prices, ScalingModel::parse(scaling_), request_);
    if (json_)
      print_json(plan, prices.currency);
    else
      print_table(plan, prices.currency);
    if (plan.recommended < 0) {
      // The constraints cannot be met: a failure the caller must see (exit 1), with the why.
      throw Error("recommend: " + plan.reasoning.back());
    }
    return 0;
  }

 private:
  void print_table(const Plan& plan, const std::string& currency) const {
    std::cout << fmt::format(
        "scenario {}: {:.0f} images x {:g} epochs, {} prices in {}{}{}\n\n", request_.scenario, request_.dataset_size,
        request_.epochs, basis_, currency,
        request_.deadline_hours > 0 ? fmt::format(", deadline {:.1f} h", request_.deadline_hours) : "",
        request_.budget > 0 ? fmt::format(", budget {:.0f}", request_.budget) : "");
    std::cout << fmt::format("{:<22} {:>4} {:<12} {:>10} {:>9} {:>9} {:>10}  {}\n", "option", "n", "hardware", "img/s",
                             "hours", "per hour", "per run", "flags");
    for (std::size_t i = 0; i < plan.options.size(); ++i) {
      const auto& o = plan.options[i];
      std::string flags;
      if (static_cast<int>(i) == plan.recommended) flags += "RECOMMENDED ";
      if (static_cast<int>(i) == plan.fallback) flags += "FALLBACK ";
      if (o.pareto) flags += "pareto ";
      if (o.estimate) flags += "estimate ";
      if (!o.meets_deadline) flags += "misses-deadline ";
      if (!o.meets_budget) flags += "over-budget ";
      std::cout << fmt::format("{:<22} {:>4} {:<12} {:>10.1f} {:>9.2f} {:>9.2f} {:>10.2f}  {}\n", o.offer, o.devices,
                               o.hardware, o.images_per_second, o.hours, o.price_per_hour, o.cost, flags);
    }
    std::cout << "\nhow each throughput was obtained:\n";
    for (const auto& o : plan.options) std::cout << "  " << o.offer << ": " << o.derivation << "\n";
    std::cout << "\n";
    for (const auto& line : plan.reasoning) std::cout << line << "\n";
    std::cout << std::flush;
  }

  void print_json(const Plan& plan, const std::string& currency) const {
    nlohmann::json options = nlohmann::json::array();
    for (const auto& o : plan.options)
      options.push_back({{"offer", o.offer},
                         {"kind", o.kind},
                         {"hardware", o.hardware},
                         {"devices", o.devices},
                         {"images_per_second", o.images_per_second},
                         {"hours", o.hours},
                         {"price_per_hour", o.price_per_hour},
                         {"cost", o.cost},
                         {"estimate", o.estimate},
                         {"derivation", o.derivation},
                         {"meets_deadline", o.meets_deadline},
                         {"meets_budget", o.meets_budget},
                         {"pareto", o.pareto}});
    auto name = [&](int i) { return i < 0 ? nlohmann::json(nullptr) : nlohmann::json(plan.options[i].offer); };
    const nlohmann::json out = {{"scenario", request_.scenario},
                                {"dataset_size", request_.dataset_size},
                                {"epochs", request_.epochs},
                                {"deadline_hours", request_.deadline_hours},
                                {"budget", request_.budget},
                                {"price_basis", basis_},
                                {"currency", currency},
                                {"options", options},
                                {"recommended", name(plan.recommended)},
                                {"fallback", name(plan.fallback)},
                                {"reasoning", plan.reasoning}};
    std::cout << out.dump(2) << std::endl;
  }

  std::vector<std::string> bench_files_;
  std::string prices_ = "configs/prices.json";
  PlanRequest request_{"baseline_cnn", 1200000, 30, 0, 0, PriceBasis::kOnDemand};
  std::string deadline_;
  std::string basis_ = "on-demand";
  std::string scaling_;
  bool json_ = false;
  std::string log_level_ = "info";
};

}  // namespace

std::unique_ptr<Command> make_recommend_command() { return std::make_unique<RecommendCommand>(); }

}  // namespace shoplens::cli
