#include "shoplens/data/shard_format.h"

#include <zlib.h>

#include <cstring>

#include "shoplens/core/errors.h"
#include "index_entries.h"

namespace shoplens {

std::uint32_t crc32_of(const void* data, std::size_t size, std::uint32_t crc) {
  const auto* p = static_cast<const Bytef*>(data);
  // zlib's crc32 takes a uInt length; feed large buffers in pieces.
  while (size > 0) {
    uInt chunk = static_cast<uInt>(std::min<std::size_t>(size, 1u << 30));
    crc = static_cast<std::uint32_t>(::crc32(crc, p, chunk));
    p += chunk;
    size -= chunk;
  }
  return crc;
}

ShardIndex parse_shard_index(const std::uint8_t* bytes, std::size_t size, const std::string& name, int num_classes) {
  auto fail = [&](const std::string& why) -> DataError { return DataError(name + ": invalid shard index: " + why); };
  ShardIndex index;
  if (size < sizeof(ShardIndexHeader))
    throw fail("file is " + std::to_string(size) + " bytes, shorter than the header");
  std::memcpy(&index.header, bytes, sizeof(ShardIndexHeader));
  const auto& h = index.header;
  if (std::memcmp(h.magic, kShardIndexMagic, sizeof h.magic) != 0) throw fail("bad magic (not a ShopLens shard index)");
  if (h.version != kShardIndexVersion)
    throw fail("version " + std::to_string(h.version) + " is not supported (expected " +
               std::to_string(kShardIndexVersion) + ")");
  if (h.entry_size != sizeof(ShardIndexEntry)) throw fail("entry size " + std::to_string(h.entry_size) + " != 48");
  index.entries =
      read_index_entries<ShardIndexEntry>(bytes, size, sizeof(ShardIndexHeader), h.count, h.entries_crc32, fail);
  std::uint64_t expected_offset = 0;
  for (std::size_t i = 0; i < index.entries.size(); ++i) {
    const auto& e = index.entries[i];
    const std::string where = "entry " + std::to_string(i) + ": ";
    if (e.offset != expected_offset)
      throw fail(where + "payloads must be contiguous (offset " + std::to_string(e.offset) + ")");
    if (e.length == 0 || e.offset + e.length > h.data_size) throw fail(where + "payload lies outside the data file");
    expected_offset = e.offset + e.length;
    if (e.height == 0 || e.width == 0) throw fail(where + "zero image size");
    if (e.channels != 3) throw fail(where + "channels must be 3");
    if (e.encoding != static_cast<std::uint8_t>(PayloadEncoding::kJpeg) &&
        e.encoding != static_cast<std::uint8_t>(PayloadEncoding::kRaw))
      throw fail(where + "unknown encoding " + std::to_string(e.encoding));
    if (e.encoding == static_cast<std::uint8_t>(PayloadEncoding::kRaw) &&
        static_cast<std::uint64_t>(e.height) * e.width * 3 != e.length)
      throw fail(where + "raw payload length does not match its size");
    if (e.split > 2) throw fail(where + "unknown split " + std::to_string(e.split));
    if (e.label < 0 || (num_classes > 0 && e.label >= num_classes))
      throw fail(where + "label " + std::to_string(e.label) + " out of range");
  }
  if (expected_offset != h.data_size) throw fail("payloads do not cover the data file exactly");
  return index;
}

}  // namespace shoplens
