// `shoplens load`: the training loader run over one split of prepared shards (image or text) for
// some epochs, checking that every sample of the split is delivered at most once per epoch, and
// measuring throughput, time waiting and, for text, the padding fraction (docs/DATA.md).
#pragma once

#include <filesystem>

#include <nlohmann/json.hpp>

#include "shoplens/core/config.h"
#include "shoplens/data/manifest.h"

namespace shoplens {

struct LoadCheckOptions {
  Split split = Split::kTrain;
  int epochs = 1;
  bool eval = false;              // the evaluation transform instead of training augmentation
  bool verify = false;            // check every shard's data checksum before loading
  std::filesystem::path preview;  // a PNG grid of the first batch's augmented images (empty: none)
};

// The split of `config.data.shards` through the loader `config` describes. Returns the report
// (load.json): per epoch batches, samples, seconds, samples/s, wait and samples not delivered, and
// the labels delivered. A sample delivered twice in an epoch is an Error; a preview of text shards
// is a UsageError.
nlohmann::json run_load_check(const Config& config, const LoadCheckOptions& options);

}  // namespace shoplens
