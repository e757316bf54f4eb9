// A _torch file only because data/open_dataset.h brings the loader's tensor types.
#include "shoplens/jobs/ledger_check.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include "shoplens/core/errors.h"
#include "shoplens/data/open_dataset.h"

namespace shoplens {
namespace {

std::filesystem::path shards_of_run(const std::filesystem::path& run_dir) {
  const std::filesystem::path config_file = run_dir / "config.json";
  std::ifstream in(config_file);
  if (!in)
    throw IoError("verify-ledger: cannot read " + config_file.string() + " (is " + run_dir.string() +
                  " a run directory?)");
  try {
    return nlohmann::json::parse(in).at("data").at("shards").get<std::string>();
  } catch (const std::exception& e) {
    throw DataError("verify-ledger: " + config_file.string() + ": no data.shards (" + e.what() + "); pass --shards");
  }
}

}  // namespace

LedgerReport verify_run_ledger(const std::filesystem::path& run_dir, const std::filesystem::path& shards) {
  const auto train = open_split(shards.empty() ? shards_of_run(run_dir) : shards, Split::kTrain).source;
  std::vector<std::uint64_t> ids;
  ids.reserve(train->size());
  for (std::size_t i = 0; i < train->size(); ++i) ids.push_back(train->sample_id(i));
  return verify_ledger(read_ledger_files(run_dir), ids);
}

}  // namespace shoplens
