// What the image and the text shard formats share (docs/DATA.md, docs/TEXT.md). A shard is two
// files: a payload (image bytes, or token ids) and an index, a header whose first 40 bytes are the
// same in both formats (ShardIndexPrefix) followed by fixed-size entries, little-endian. The
// payload is committed first and the index renamed into place last, so an index that exists
// describes a complete payload. The index holds the CRC-32 of the payload and of its entries; the
// dataset file lists every shard with the CRC-32 of its whole index. Plain C++ (no torch).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "shoplens/core/atomic_file.h"
#include "shoplens/core/checksum.h"
#include "shoplens/data/manifest.h"

namespace shoplens {

#pragma pack(push, 1)
struct ShardIndexPrefix {
  char magic[8];
  std::uint32_t version;
  std::uint32_t entry_size;
  std::uint64_t count;
  std::uint64_t payload_size;  // in the format's unit: bytes of image data, or tokens
  std::uint32_t payload_crc32;
  std::uint32_t entries_crc32;
};
#pragma pack(pop)
static_assert(sizeof(ShardIndexPrefix) == 40, "index prefix layout");

// One shard format's constants: the one place a format's names, files and keys are spelled.
struct ShardFormat {
  const char* index_kind;    // in errors: "shard index", "text shard index"
  char magic[8];             // the index's first bytes
  std::uint32_t version;     // of the index
  const char* payload_ext;   // ".data", ".tokens"
  const char* index_ext;     // ".idx", ".tidx"
  const char* payload_file;  // in errors: "data file", "tokens file"
  const char* payload_unit;  // of ShardIndexPrefix::payload_size: "bytes", "tokens"
  const char* dataset_file;  // the folder's description: "dataset.json", "text_dataset.json"
  const char* size_key;      // the dataset file's key for payload_size
  const char* crc_key;       // the dataset file's key for payload_crc32
};

// One shard as the dataset file lists it.
struct ShardListing {
  std::string name;  // a plain file name stem: <name><payload_ext> and <name><index_ext>
  Split split = Split::kTrain;
  std::uint64_t count = 0;
  std::uint64_t payload_size = 0;  // as ShardIndexPrefix::payload_size
  std::uint32_t payload_crc32 = 0;
  std::uint32_t index_crc32 = 0;  // CRC-32 of the whole index file
};

std::filesystem::path shard_index_path(const std::filesystem::path& dir, const std::string& name,
                                       const ShardFormat& format);
std::filesystem::path shard_payload_path(const std::filesystem::path& dir, const std::string& name,
                                         const ShardFormat& format);

// A read-only memory map.
class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

// Writes one shard: payload records appended one by one, then the index. The listing it returns
// is what the dataset file records for the shard.
class ShardFileWriter {
 public:
  ShardFileWriter(const std::filesystem::path& dir, std::string name, Split split, const ShardFormat& format);
  const ShardListing& listing() const { return listing_; }
  // Appends a record's payload bytes; `units` is its size in the format's unit.
  void append(const void* bytes, std::size_t size, std::uint64_t units);
  // Commits the payload, then writes `header` (whose prefix this fills in) and `entries` as the
  // index, renamed into place last (its presence marks the shard complete).
  template <class Header, class Entry>
  ShardListing finish(Header header, const std::vector<Entry>& entries) {
    stamp(prefix_of(header), sizeof(Entry), entries.size(), crc32_of(entries.data(), entries.size() * sizeof(Entry)));
    return commit(&header, sizeof header, entries.data(), entries.size() * sizeof(Entry));
  }

 private:
  void stamp(ShardIndexPrefix& prefix, std::size_t entry_size, std::size_t count, std::uint32_t entries_crc32) const;
  ShardListing commit(const void* header, std::size_t header_size, const void* entries, std::size_t entries_size);

  std::filesystem::path dir_;
  const ShardFormat& format_;
  ShardListing listing_;
  AtomicFileWriter payload_;
};

// The index file of a listed shard, mapped: DataError when it is missing (a torn write) or when
// `listed_crc32` is not 0 and differs from the file's.
std::unique_ptr<MappedFile> map_shard_index(const std::filesystem::path& dir, const std::string& name,
                                            const ShardFormat& format, std::uint32_t listed_crc32);

// The payload file its index describes, mapped: DataError when it is missing or not `bytes` long,
// and with `verify` when its CRC-32 is not `crc32` (reads all of it).
std::unique_ptr<MappedFile> map_shard_payload(const std::filesystem::path& dir, const std::string& name,
                                              const ShardFormat& format, std::uint64_t bytes, std::uint32_t crc32,
                                              bool verify);

// DataError: entry `entry` of `index` belongs to another split than `split`, its shard's.
[[noreturn]] void throw_wrong_split(const std::filesystem::path& index, std::size_t entry, Split split);

// DataError unless a shard's index holds what the dataset file lists for it: the record count, the
// payload size and checksum, and only records of the listed split. `Reader` has size(), prefix()
// and entry(i).split.
void check_listed_prefix(const ShardIndexPrefix& prefix, std::size_t records, const ShardListing& listing,
                         const ShardFormat& format, const std::filesystem::path& dir);
template <class Reader>
void check_listed(const Reader& reader, const ShardListing& listing, const ShardFormat& format,
                  const std::filesystem::path& dir) {
  check_listed_prefix(reader.prefix(), reader.size(), listing, format, dir);
  for (std::size_t i = 0; i < reader.size(); ++i)
    if (reader.entry(i).split != static_cast<std::uint8_t>(listing.split))
      throw_wrong_split(shard_index_path(dir, listing.name, format), i, listing.split);
}

// The records of several shards as one sequence, in the order the shards were added.
template <class Reader>
class ShardTable {
 public:
  void add(std::unique_ptr<Reader> reader) {
    const auto r = static_cast<std::uint32_t>(readers_.size());
    for (std::size_t i = 0; i < reader->size(); ++i) locations_.emplace_back(r, static_cast<std::uint32_t>(i));
    readers_.push_back(std::move(reader));
  }
  std::size_t size() const { return locations_.size(); }
  // The shard holding record `index` and the record's place in it; std::out_of_range past the end.
  std::pair<const Reader*, std::size_t> locate(std::size_t index) const {
    const auto& [r, i] = locations_.at(index);
    return {readers_[r].get(), i};
  }
  const auto& entry(std::size_t index) const {
    const auto [reader, i] = locate(index);
    return reader->entry(i);
  }

 private:
  std::vector<std::unique_ptr<Reader>> readers_;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> locations_;  // (reader, entry)
};

// Files in `dir` with the format's extensions that `listings` do not name (such as the payload
// of a shard whose index was never written: a torn write), sorted. They are never read.
std::vector<std::string> unlisted_shard_files(const std::filesystem::path& dir,
                                              const std::vector<ShardListing>& listings, const ShardFormat& format);

inline ShardIndexPrefix& prefix_of(ShardIndexPrefix& header) { return header; }
inline const ShardIndexPrefix& prefix_of(const ShardIndexPrefix& header) { return header; }

}  // namespace shoplens
