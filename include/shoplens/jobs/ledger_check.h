// `shoplens verify-ledger`: a training run's sample ledger checked against the train split of the
// dataset it trained on (docs/DISTRIBUTED.md).
#pragma once

#include <filesystem>

#include "shoplens/dist/ledger.h"

namespace shoplens {

// `shards` empty: the run's own data.shards (its config.json). IoError when the run directory has
// no readable config.json, DataError when that names no data.shards; the dataset's own errors
// otherwise. Image or text shards alike: the ledger speaks of sample ids only. A finished run's
// summary.json says the step it ended at (steps up to it that the ledger lacks are a gap) and how
// it ended (whether samples its last epoch did not read are expected).
LedgerReport verify_run_ledger(const std::filesystem::path& run_dir, const std::filesystem::path& shards);

}  // namespace shoplens
