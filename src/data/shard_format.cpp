#include "shoplens/data/shard_format.h"

#include <functional>

#include "shard_index_reader.h"
#include "shoplens/core/errors.h"

namespace shoplens {

const ShardFormat kImageShardFormat = {
    "shard index",                             // index_kind
    {'S', 'L', 'S', 'H', 'I', 'D', 'X', '1'},  // magic
    1,                                         // version
    ".data",                                   // payload_ext
    ".idx",                                    // index_ext
    "data file",                               // payload_file
    "bytes",                                   // payload_unit
    "dataset.json",                            // dataset_file
    "data_bytes",                              // size_key
    "data_crc32",                              // crc_key
};

namespace {

void check_image_entry(const ShardIndexEntry& e, int num_classes, const std::string& where,
                       const std::function<DataError(const std::string&)>& fail) {
  if (e.height == 0 || e.width == 0) throw fail(where + "zero image size");
  if (e.channels != 3) throw fail(where + "channels must be 3");
  if (e.encoding != static_cast<std::uint8_t>(PayloadEncoding::kJpeg) &&
      e.encoding != static_cast<std::uint8_t>(PayloadEncoding::kRaw))
    throw fail(where + "unknown encoding " + std::to_string(e.encoding));
  if (e.encoding == static_cast<std::uint8_t>(PayloadEncoding::kRaw) &&
      static_cast<std::uint64_t>(e.height) * e.width * 3 != e.length)
    throw fail(where + "raw payload length does not match its size");
  if (e.label < 0 || (num_classes > 0 && e.label >= num_classes))
    throw fail(where + "label " + std::to_string(e.label) + " out of range");
}

}  // namespace

ShardIndex parse_shard_index(const std::uint8_t* bytes, std::size_t size, const std::string& name, int num_classes) {
  const std::function<DataError(const std::string&)> fail = [&](const std::string& why) {
    return DataError(name + ": invalid shard index: " + why);
  };
  ShardIndex index;
  index.entries =
      read_shard_index<ShardIndexHeader, ShardIndexEntry>(bytes, size, kImageShardFormat, index.header, fail);
  check_record_extents(index.entries, index.header.payload_size, kImageShardFormat, fail);
  for (std::size_t i = 0; i < index.entries.size(); ++i)
    check_image_entry(index.entries[i], num_classes, entry_place(i, index.entries[i]), fail);
  return index;
}

}  // namespace shoplens
