// Data-parallel `-b auto`: the ranks' find-batch answers agreed through the process group.
#include <algorithm>

#include <fmt/format.h>

#include "shoplens/batch/find_batch.h"
#include "shoplens/core/strings.h"
#include "shoplens/dist/process_group.h"

namespace shoplens {

namespace {

using json = nlohmann::json;

// The part of a rank's answer that decides its job: small enough for the store.
json plan_of(const json& found) {
  return {{"micro_batch", found.at("micro_batch")},
          {"config_patch", found.at("config_patch")},
          {"notes", found.value("notes", json::array())}};
}

int planned_micro_batch(const json& plan) {
  return planned_settings_from_json(plan.at("config_patch"), "a rank's find-batch plan").micro_batch;
}

}  // namespace

json agree_on_found_batch(ProcessGroup& group, const json& found) {
  const std::vector<std::string> answers = group.all_gather_string("find_batch_plan", plan_of(found).dump());
  std::vector<json> plans;
  plans.reserve(answers.size());
  for (const auto& answer : answers) plans.push_back(json::parse(answer));
  std::vector<int> planned_batches;  // each plan checked and read once
  planned_batches.reserve(plans.size());
  for (const auto& plan : plans) planned_batches.push_back(planned_micro_batch(plan));
  const auto chosen = static_cast<std::size_t>(std::min_element(planned_batches.begin(), planned_batches.end()) -
                                               planned_batches.begin());
  json planned(planned_batches), largest = json::array();
  for (const auto& plan : plans) largest.push_back(plan.at("micro_batch"));
  json agreed = found;
  agreed["config_patch"] = plans[chosen].at("config_patch");
  agreed["micro_batch"] = plans[chosen].at("micro_batch");
  agreed["notes"] = plans[chosen].at("notes");
  agreed["rank_agreement"] = {
      {"planned_micro_batches", planned}, {"largest_that_fit", largest}, {"chosen_rank", static_cast<int>(chosen)}};
  std::vector<std::string> listed;
  for (const auto& b : planned) listed.push_back(std::to_string(b.get<int>()));
  const bool all_equal = std::all_of(planned.begin(), planned.end(), [&](const json& b) { return b == planned[0]; });
  if (!all_equal)
    agreed["notes"].push_back(fmt::format(
        "the ranks' searches planned micro-batches {} (in rank order): every rank trains rank {}'s plan, the "
        "smallest, which fits every device",
        join(listed, ", "), chosen));
  return agreed;
}

}  // namespace shoplens
