// The packed shard format (docs/DATA.md). A shard is two files:
//   <name>.data  payloads back to back (JPEG bytes, or raw RGB pixels)
//   <name>.idx   a 40-byte header and one 48-byte entry per record, little-endian
// The index is written after the data and renamed into place last, so an index that exists
// describes a complete data file; both carry CRC-32 checksums.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace shoplens {

enum class PayloadEncoding : std::uint8_t { kJpeg = 1, kRaw = 2 };
constexpr int kIndexMetadataSlots = 8;
constexpr std::uint32_t kShardIndexVersion = 1;
constexpr char kShardIndexMagic[8] = {'S', 'L', 'S', 'H', 'I', 'D', 'X', '1'};

#pragma pack(push, 1)
struct ShardIndexHeader {
  char magic[8];
  std::uint32_t version;
  std::uint32_t entry_size;
  std::uint64_t count;
  std::uint64_t data_size;
  std::uint32_t data_crc32;
  std::uint32_t entries_crc32;
};

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
static_assert(sizeof(ShardIndexHeader) == 40, "index header layout");
static_assert(sizeof(ShardIndexEntry) == 48, "index entry layout");

struct ShardIndex {
  ShardIndexHeader header{};
  std::vector<ShardIndexEntry> entries;
};

// Validates and decodes an index file's bytes. `name` is used in errors. Every offset/length is
// checked against the header's data size and every field against its range; `num_classes` > 0
// also bounds labels. Throws DataError naming the file and the entry.
ShardIndex parse_shard_index(const std::uint8_t* bytes, std::size_t size, const std::string& name, int num_classes = 0);

std::uint32_t crc32_of(const void* data, std::size_t size, std::uint32_t crc = 0);

}  // namespace shoplens
