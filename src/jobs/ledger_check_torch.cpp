// A _torch file only because data/open_dataset.h brings the loader's tensor types.
#include "shoplens/jobs/ledger_check.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/json_fields.h"
#include "shoplens/data/open_dataset.h"

namespace shoplens {
namespace {

std::filesystem::path shards_of_run(const std::filesystem::path& run_dir) {
  const std::filesystem::path config_file = run_dir / "config.json";
  std::ifstream in(config_file);
  if (!in)
    throw IoError("verify-ledger: cannot read " + config_file.string() + " (is " + run_dir.string() +
                  " a run directory?)");
  const std::string where = "verify-ledger: " + config_file.string();
  const nlohmann::json config = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded()) throw DataError(where + ": not JSON; pass --shards");
  try {
    return JsonFields<DataError>(config, where).section("data").text("shards", true);
  } catch (const DataError& e) {
    throw DataError(std::string(e.what()) + "; pass --shards");
  }
}

// How a finished run ended: summary.json's step and status. Zero and "" while the run has no
// summary (never finished, or still running): then only gaps before the last recorded step can
// be seen, and unread samples are not judged as the run's end.
struct RunEnd {
  std::int64_t final_step = 0;
  std::string status;
};

RunEnd end_of_run(const std::filesystem::path& run_dir) {
  const std::filesystem::path summary_file = run_dir / "summary.json";
  std::error_code ec;
  if (!std::filesystem::exists(summary_file, ec)) return {};
  const std::string where = "verify-ledger: " + summary_file.string();
  const nlohmann::json summary = nlohmann::json::parse(read_file(summary_file), nullptr, /*allow_exceptions=*/false);
  const JsonFields<DataError> fields(summary, where);
  if (!summary.is_object()) fields.expect_object("a JSON object (move it aside to check the ledger alone)");
  RunEnd end{fields.integer("steps", 0, kMaxLedgerStep), fields.text("status", false)};
  if (end.status.empty()) end.status = "completed";  // a summary written before it recorded its status
  return end;
}

}  // namespace

LedgerReport verify_run_ledger(const std::filesystem::path& run_dir, const std::filesystem::path& shards) {
  const auto train = open_split(shards.empty() ? shards_of_run(run_dir) : shards, Split::kTrain).source;
  std::vector<std::uint64_t> ids;
  ids.reserve(train->size());
  for (std::size_t i = 0; i < train->size(); ++i) ids.push_back(train->sample_id(i));
  const RunEnd end = end_of_run(run_dir);
  return verify_ledger(read_ledger_files(run_dir), ids, end.final_step, end.status);
}

}  // namespace shoplens
