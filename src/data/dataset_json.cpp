#include "dataset_json.h"

#include <set>

#include "shoplens/core/atomic_file.h"
#include "shoplens/core/json_limits.h"

namespace shoplens {

nlohmann::json read_json_document(const std::filesystem::path& file) {
  const std::string text = read_file(file);
  if (json_nesting_exceeds(text))
    throw DataError(file.string() + ": nests deeper than " + std::to_string(kMaxJsonNesting));
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw DataError(file.string() + ": " + e.what());
  }
}

nlohmann::json listing_to_json(const ShardListing& shard, const ShardFormat& format) {
  return {{"name", shard.name},
          {"split", split_name(shard.split)},
          {"count", shard.count},
          {format.size_key, shard.payload_size},
          {format.crc_key, shard.payload_crc32},
          {"index_crc32", shard.index_crc32}};
}

ShardListing listing_from_json(const nlohmann::json& shard, const std::string& file, const ShardFormat& format) {
  ShardListing listing;
  listing.name = required<std::string>(shard, "name", file, "shards");
  const std::string context = "shards." + listing.name;
  if (listing.name.empty() || listing.name.find('/') != std::string::npos ||
      listing.name.find("..") != std::string::npos)
    throw DataError(file + ": shard name '" + listing.name + "' is not a plain file name");
  const auto split = parse_split(required<std::string>(shard, "split", file, context));
  if (!split) throw DataError(file + ": " + context + ": key 'split': unknown split");
  listing.split = *split;
  listing.count = required<std::uint64_t>(shard, "count", file, context);
  listing.payload_size = required<std::uint64_t>(shard, format.size_key, file, context);
  listing.payload_crc32 = required<std::uint32_t>(shard, format.crc_key, file, context);
  listing.index_crc32 = required<std::uint32_t>(shard, "index_crc32", file, context);
  return listing;
}

std::vector<ShardListing> read_listings(const nlohmann::json& doc, const std::string& file, const ShardFormat& format) {
  std::vector<ShardListing> listings;
  std::set<std::string> names;
  for (const auto& shard : required<nlohmann::json>(doc, "shards", file)) {
    listings.push_back(listing_from_json(shard, file, format));
    if (!names.insert(listings.back().name).second)
      throw DataError(file + ": shard '" + listings.back().name + "' is listed twice");
  }
  return listings;
}

nlohmann::json listings_to_json(const std::vector<ShardListing>& shards, const ShardFormat& format) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& shard : shards) out.push_back(listing_to_json(shard, format));
  return out;
}

}  // namespace shoplens
