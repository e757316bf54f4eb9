// The text task's glue between a shard folder and the run's config (docs/TEXT.md): recognising a
// text dataset, resolving config.text from text_dataset.json, and the batch options it implies.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "shoplens/core/config.h"
#include "shoplens/data/text_batches.h"
#include "shoplens/data/text_shards.h"

namespace shoplens {

// True when `dir` holds text shards (text_dataset.json) rather than image shards.
bool is_text_dataset(const std::filesystem::path& dir);

// Fills config.text's dataset fields (vocab_size, categorical_cardinalities, numeric_fields) from
// the dataset; a config that already names them (a resumed run) must agree: ConfigError naming
// the key and both values otherwise. (An image model on text data is make_model's ConfigError.)
void resolve_text_config(Config& config, const TextDatasetInfo& info, const std::string& where);

// Loader-side options of the configured text task.
TextBatchOptions text_batch_options(const Config& config, const TextDatasetInfo& info);

// The class names a binary text task reports with.
std::vector<std::string> text_class_names();

}  // namespace shoplens
