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

ShardListing listing_from_json(const DatasetFields& shard, const ShardFormat& format) {
  shard.check_keys({"name", "split", "count", format.size_key, format.crc_key, "index_crc32"});
  ShardListing listing;
  listing.name = shard.get<std::string>("name");
  if (listing.name.empty() || listing.name.find('/') != std::string::npos ||
      listing.name.find("..") != std::string::npos)
    shard.fail("name", "'" + listing.name + "' is not a plain file name");
  const auto split = parse_split(shard.get<std::string>("split"));
  listing.split = split ? *split : *parse_split(shard.choice("split", {"train", "val", "test"}));
  listing.count = shard.get<std::uint64_t>("count");
  listing.payload_size = shard.get<std::uint64_t>(format.size_key);
  listing.payload_crc32 = shard.get<std::uint32_t>(format.crc_key);
  listing.index_crc32 = shard.get<std::uint32_t>("index_crc32");
  return listing;
}

std::vector<ShardListing> read_listings(const DatasetFields& doc, const ShardFormat& format) {
  std::vector<ShardListing> listings;
  std::set<std::string> names;
  const std::size_t count = doc.list("shards").size();
  for (std::size_t i = 0; i < count; ++i) {
    const DatasetFields shard = doc.element("shards", i);
    listings.push_back(listing_from_json(shard, format));
    if (!names.insert(listings.back().name).second)
      shard.fail("name", "shard '" + listings.back().name + "' is listed twice");
  }
  return listings;
}

nlohmann::json listings_to_json(const std::vector<ShardListing>& shards, const ShardFormat& format) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& shard : shards) out.push_back(listing_to_json(shard, format));
  return out;
}

}  // namespace shoplens
