// What the two dataset files (dataset.json for image shards, text_dataset.json for text shards)
// share: keys read with errors that name the file and the key, and the list of shards.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shoplens/core/errors.h"
#include "shoplens/core/json_fields.h"
#include "shoplens/data/shard_core.h"

namespace shoplens {

// The JSON document in `file`; DataError naming the file when it is not JSON or nests too deep.
nlohmann::json read_json_document(const std::filesystem::path& file);

// The checked reader of both files' fields (core/json_fields.h): DataError naming the file and the key.
using DatasetFields = JsonFields<DataError>;

nlohmann::json listing_to_json(const ShardListing& shard, const ShardFormat& format);
// DataError naming the file and the key for a missing key, an unknown split or a name that is not a
// plain file name.
ShardListing listing_from_json(const DatasetFields& shard, const ShardFormat& format);

// The document's "shards" list; DataError naming the file also for a shard listed twice.
std::vector<ShardListing> read_listings(const DatasetFields& doc, const ShardFormat& format);
nlohmann::json listings_to_json(const std::vector<ShardListing>& shards, const ShardFormat& format);

}  // namespace shoplens
