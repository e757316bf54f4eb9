// `shoplens load`: the training loader run over one split of prepared shards (image or text) for
// some epochs, checking that every sample of the split is delivered at most once per epoch, and
// measuring throughput, time waiting and, for text, the padding fraction (docs/DATA.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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

// One epoch through the loader.
struct LoadEpoch {
  int epoch = 0;
  std::int64_t batches = 0, samples = 0;
  double seconds = 0, samples_per_second = 0, wait_seconds = 0;
  std::uint64_t not_delivered = 0;  // samples of the split the epoch did not deliver
  // Text shards only: the share of token slots that were padding, and the real tokens.
  std::optional<double> padding_fraction;
  std::optional<std::int64_t> real_tokens;
};

// What `shoplens load` found (load.json).
struct LoadReport {
  std::string shards;
  Split split = Split::kTrain;
  std::uint64_t samples_in_split = 0;
  std::vector<LoadEpoch> epochs;
  std::vector<std::pair<std::string, std::uint64_t>> labels_delivered;  // class name, samples, in class order
  int workers = 0;
  bool text = false;
  nlohmann::json to_json() const;
};

// The split of `config.data.shards` through the loader `config` describes, for `options.epochs`
// epochs. A sample delivered twice in an epoch is an Error; a preview of text shards is a
// UsageError.
LoadReport run_load_check(const Config& config, const LoadCheckOptions& options);

}  // namespace shoplens
