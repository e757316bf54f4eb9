// What the batch study reads from a run's JSON records (private to src/bench).
#pragma once

#include <nlohmann/json.hpp>

namespace shoplens {

// j[key] when it is a number, else `fallback` (a record written before the key existed, or null).
inline double num_or(const nlohmann::json& j, const char* key, double fallback) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : fallback;
}

}  // namespace shoplens
