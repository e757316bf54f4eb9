// `shoplens recommend`'s output (docs/COMPUTE.md): a plan as a table for people and as a JSON
// document for programs, both naming the request they answer.
#pragma once

#include <string>

#include "shoplens/bench/compute_plan.h"

namespace shoplens {

// The request, one row per option (with its flags: RECOMMENDED, FALLBACK, pareto, estimate,
// misses-deadline, over-budget), how each throughput was obtained, and the reasoning.
std::string plan_table(const Plan& plan, const PlanRequest& request, const std::string& currency);

// The same as one JSON object: the request, "options", "recommended"/"fallback" (offer names or
// null) and "reasoning".
std::string plan_json(const Plan& plan, const PlanRequest& request, const std::string& currency);

}  // namespace shoplens
