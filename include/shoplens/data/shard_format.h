// The packed image shard format (docs/DATA.md), on the shard core (shard_core.h):
//   <name>.data  payloads back to back (JPEG bytes, or raw RGB pixels)
//   <name>.idx   the 40-byte common header and one 48-byte entry per record
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "shoplens/data/shard_core.h"

namespace shoplens {

enum class PayloadEncoding : std::uint8_t { kJpeg = 1, kRaw = 2 };
constexpr int kIndexMetadataSlots = 8;

extern const ShardFormat kImageShardFormat;

// The image format's header is the common prefix (payload_size: bytes of the .data file).
using ShardIndexHeader = ShardIndexPrefix;

#pragma pack(push, 1)
struct ShardIndexEntry {
  std::uint64_t sample_id;  // dense id over the prepared dataset (records.csv maps it back)
  std::uint64_t offset;     // into the .data file
  std::uint32_t length;
  std::uint16_t height;
  std::uint16_t width;
  std::uint8_t channels;
  std::uint8_t encoding;  // PayloadEncoding
  std::uint8_t split;     // Split
  std::uint8_t reserved;
  std::int32_t label;
  std::uint16_t metadata[kIndexMetadataSlots];  // 0 = missing, k = vocabulary[k-1]
};
#pragma pack(pop)
static_assert(sizeof(ShardIndexEntry) == 48, "index entry layout");

struct ShardIndex {
  ShardIndexHeader header{};
  std::vector<ShardIndexEntry> entries;
};

// Validates and decodes an index file's bytes. `name` is used in errors. Every offset/length is
// checked against the header's data size and every field against its range; `num_classes` > 0
// also bounds labels. Throws DataError naming the file and the entry.
ShardIndex parse_shard_index(const std::uint8_t* bytes, std::size_t size, const std::string& name, int num_classes = 0);

}  // namespace shoplens
