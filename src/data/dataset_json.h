// What the two dataset files (dataset.json for image shards, text_dataset.json for text shards)
// share: keys read with errors that name the file and the key, and the list of shards.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shoplens/core/errors.h"
#include "shoplens/data/shard_core.h"

namespace shoplens {

// The JSON document in `file`; DataError naming the file when it is not JSON or nests too deep.
nlohmann::json read_json_document(const std::filesystem::path& file);

// doc[key] as a T; DataError "<file>: <context>: missing key '<key>'" (or naming the wrong type).
template <class T>
T required(const nlohmann::json& doc, const char* key, const std::string& file, const std::string& context = "") {
  const std::string where = file + ": " + (context.empty() ? "" : context + ": ");
  if (!doc.is_object() || !doc.contains(key)) throw DataError(where + "missing key '" + key + "'");
  try {
    return doc.at(key).get<T>();
  } catch (const nlohmann::json::exception& e) {
    throw DataError(where + "key '" + key + "': " + e.what());
  }
}

nlohmann::json listing_to_json(const ShardListing& shard, const ShardFormat& format);
// DataError naming `file` for a missing key, an unknown split or a name that is not a plain file name.
ShardListing listing_from_json(const nlohmann::json& shard, const std::string& file, const ShardFormat& format);

// The document's "shards" array; DataError naming `file` also for a shard listed twice.
std::vector<ShardListing> read_listings(const nlohmann::json& doc, const std::string& file, const ShardFormat& format);
nlohmann::json listings_to_json(const std::vector<ShardListing>& shards, const ShardFormat& format);

}  // namespace shoplens
