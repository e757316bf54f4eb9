// The run's summary (private to src/train): the test split scored with the best weights,
// summary.json's record (with the token and data-parallel records), its closing log line and the
// warning when the job's resident peak outgrew train.memory_budget.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "shoplens/core/byte_size.h"
#include "trainer_checkpoints.h"
#include "trainer_evaluator.h"
#include "trainer_run.h"

namespace shoplens {

// Text runs: the token slots computed on and the real tokens among them, over this process's
// training seconds.
struct TokenTally {
  std::int64_t padded = 0;
  std::int64_t real = 0;
  double seconds = 0;
};
nlohmann::json token_record(const TokenTally& tokens, std::int64_t token_budget, bool bucket_by_length);

// The warning when summary.json's job_peak_bytes went past a CPU memory budget; none on CUDA,
// without a budget, without a measured peak or within it.
std::optional<std::string> budget_overrun_warning(const nlohmann::json& summary, ByteSize budget, bool cuda);

// The test split scored with the best weights, as a user would deploy them (test_report.md on
// rank 0). Null without a test split.
nlohmann::json test_with_best_weights(TrainerRun& run, Evaluator& evaluator, TrainerCheckpoints& checkpoints);
// summary.json's content; `wall` is this process's seconds in fit.
nlohmann::json summary_record(const TrainerRun& run, const nlohmann::json& test_json, double wall);
// The closing line (and the budget warning) on the console.
void log_summary(const TrainerRun& run, const nlohmann::json& summary, const nlohmann::json& test_json);

}  // namespace shoplens
