#include "shoplens/bench/plan_report.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace shoplens {
namespace {

std::string flags_of(const Plan& plan, std::size_t i) {
  const auto& o = plan.options[i];
  std::string flags;
  if (static_cast<int>(i) == plan.recommended) flags += "RECOMMENDED ";
  if (static_cast<int>(i) == plan.fallback) flags += "FALLBACK ";
  if (o.pareto) flags += "pareto ";
  if (o.estimate) flags += "estimate ";
  if (!o.meets_deadline) flags += "misses-deadline ";
  if (!o.meets_budget) flags += "over-budget ";
  return flags;
}

nlohmann::json option_json(const PlanOption& o) {
  return {{"offer", o.offer},
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
          {"pareto", o.pareto}};
}

}  // namespace

std::string plan_table(const Plan& plan, const PlanRequest& request, const std::string& currency) {
  std::string out =
      fmt::format("scenario {}: {:.0f} images x {:g} epochs, {} prices in {}{}{}\n\n", request.scenario,
                  request.dataset_size, request.epochs, to_string(request.basis), currency,
                  request.deadline_hours > 0 ? fmt::format(", deadline {:.1f} h", request.deadline_hours) : "",
                  request.budget > 0 ? fmt::format(", budget {:.0f}", request.budget) : "");
  out += fmt::format("{:<22} {:>4} {:<12} {:>10} {:>9} {:>9} {:>10}  {}\n", "option", "n", "hardware", "img/s", "hours",
                     "per hour", "per run", "flags");
  for (std::size_t i = 0; i < plan.options.size(); ++i) {
    const auto& o = plan.options[i];
    out += fmt::format("{:<22} {:>4} {:<12} {:>10.1f} {:>9.2f} {:>9.2f} {:>10.2f}  {}\n", o.offer, o.devices,
                       o.hardware, o.images_per_second, o.hours, o.price_per_hour, o.cost, flags_of(plan, i));
  }
  out += "\nhow each throughput was obtained:\n";
  for (const auto& o : plan.options) out += "  " + o.offer + ": " + o.derivation + "\n";
  out += "\n";
  for (const auto& line : plan.reasoning) out += line + "\n";
  return out;
}

std::string plan_json(const Plan& plan, const PlanRequest& request, const std::string& currency) {
  nlohmann::json options = nlohmann::json::array();
  for (const auto& o : plan.options) options.push_back(option_json(o));
  auto name = [&](int i) { return i < 0 ? nlohmann::json(nullptr) : nlohmann::json(plan.options[i].offer); };
  const nlohmann::json out = {{"scenario", request.scenario},
                              {"dataset_size", request.dataset_size},
                              {"epochs", request.epochs},
                              {"deadline_hours", request.deadline_hours},
                              {"budget", request.budget},
                              {"price_basis", to_string(request.basis)},
                              {"currency", currency},
                              {"options", options},
                              {"recommended", name(plan.recommended)},
                              {"fallback", name(plan.fallback)},
                              {"reasoning", plan.reasoning}};
  return out.dump(2) + "\n";
}

}  // namespace shoplens
