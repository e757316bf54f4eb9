// The one opener of a prepared dataset's split, image or text as the folder says
// (text_dataset.json marks text shards): verbs and tools ask for a split, not for a format.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "shoplens/core/config.h"
#include "shoplens/data/loader.h"
#include "shoplens/data/sample_source.h"
#include "shoplens/data/manifest.h"

namespace shoplens {

struct OpenedSplit {
  std::shared_ptr<const SampleSource> source;
  std::vector<std::string> class_names;
  bool text = false;
  std::unique_ptr<Loader> loader;  // set by open_split_loader only
};

// `verify` checks every shard's data checksum first (reads everything). DataError / IoError
// naming the file for a missing or damaged dataset.
OpenedSplit open_split(const std::filesystem::path& shards, Split split, bool verify = false);

// The split of `config.data.shards` with its loader: images with `config.augment`, text with the
// dataset's token options (text.*).
OpenedSplit open_split_loader(const Config& config, Split split, bool verify, const LoaderOptions& options);

}  // namespace shoplens
