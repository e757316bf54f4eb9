#include "zip_directory.h"

#include <algorithm>
#include <string_view>

#include "shoplens/core/errors.h"

namespace shoplens::detail {
namespace {

constexpr std::uint32_t kEndOfDirectory = 0x06054b50, kZip64End = 0x06064b50, kZip64Locator = 0x07064b50,
                        kDirectoryEntry = 0x02014b50;
constexpr std::size_t kEndRecordSize = 22, kLocatorSize = 20, kZip64EndSize = 56, kEntryHeaderSize = 46;
constexpr std::size_t kMaxComment = 65535;
// Far more than any torch.save file needs (about 100 bytes per tensor), small enough to read.
constexpr std::uint64_t kMaxDirectoryBytes = 256u << 20;

// Little-endian fields at an offset of the tail; `at + width` is checked by the callers' bounds.
std::uint64_t field(std::string_view bytes, std::size_t at, int width) {
  std::uint64_t value = 0;
  for (int i = width - 1; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(bytes[at + i]);
  return value;
}

struct Directory {
  std::uint64_t entries = 0, size = 0, offset = 0;
};

[[noreturn]] void malformed(const std::string& source, const std::string& what) {
  throw DataError(source + ": not a readable zip archive: " + what);
}

std::size_t find_end_record(std::string_view tail, const std::string& source) {
  if (tail.size() < kEndRecordSize) malformed(source, "too short for an end-of-directory record");
  for (std::size_t at = tail.size() - kEndRecordSize + 1; at-- > 0;)
    if (field(tail, at, 4) == kEndOfDirectory) return at;
  malformed(source, "no end-of-directory record");
}

// The zip64 end record, found through its locator just before the classic end record.
Directory zip64_directory(std::string_view tail, std::size_t end_at, std::uint64_t file_size, const ReadAt& read_at,
                          const std::string& source) {
  if (end_at < kLocatorSize || field(tail, end_at - kLocatorSize, 4) != kZip64Locator)
    malformed(source, "a zip64 archive without its zip64 locator");
  const std::uint64_t at = field(tail, end_at - kLocatorSize + 8, 8);
  if (at > file_size || file_size - at < kZip64EndSize) malformed(source, "the zip64 end record lies outside the file");
  const std::string record = read_at(at, kZip64EndSize);
  if (field(record, 0, 4) != kZip64End) malformed(source, "bad zip64 end record signature");
  return {field(record, 32, 8), field(record, 40, 8), field(record, 48, 8)};
}

// Sizes stored as 0xFFFFFFFF in an entry live in its zip64 extra field (id 1), in this order.
void read_zip64_sizes(std::string_view extra, ZipEntry& entry, const std::string& source) {
  for (std::size_t at = 0; at + 4 <= extra.size();) {
    const auto id = field(extra, at, 2), size = field(extra, at + 2, 2);
    if (at + 4 + size > extra.size()) break;
    if (id == 1) {
      std::size_t next = at + 4;
      for (std::uint64_t* value : {&entry.uncompressed_size, &entry.compressed_size}) {
        if (*value != 0xFFFFFFFFu) continue;
        if (next + 8 > at + 4 + size) malformed(source, "entry '" + entry.name + "' has a short zip64 field");
        *value = field(extra, next, 8);
        next += 8;
      }
      return;
    }
    at += 4 + size;
  }
  if (entry.uncompressed_size == 0xFFFFFFFFu || entry.compressed_size == 0xFFFFFFFFu)
    malformed(source, "entry '" + entry.name + "' lacks its zip64 sizes");
}

// The directory's place, from the end record (classic or zip64), checked to lie inside the file.
Directory locate_directory(std::uint64_t file_size, const ReadAt& read_at, const std::string& source) {
  const std::size_t tail_size =
      static_cast<std::size_t>(std::min<std::uint64_t>(file_size, kEndRecordSize + kMaxComment));
  const std::string tail = read_at(file_size - tail_size, tail_size);
  const std::size_t end_at = find_end_record(tail, source);
  Directory dir{field(tail, end_at + 10, 2), field(tail, end_at + 12, 4), field(tail, end_at + 16, 4)};
  if (dir.entries == 0xFFFF || dir.size == 0xFFFFFFFFu || dir.offset == 0xFFFFFFFFu)
    dir = zip64_directory(tail, end_at, file_size, read_at, source);
  if (dir.offset > file_size || dir.size > file_size - dir.offset)
    malformed(source, "the central directory lies outside the file");
  if (dir.size > kMaxDirectoryBytes) malformed(source, "a central directory of " + std::to_string(dir.size) + " bytes");
  if (dir.entries > dir.size / kEntryHeaderSize) malformed(source, "more entries than the directory can hold");
  return dir;
}

}  // namespace

std::vector<ZipEntry> read_zip_directory(std::uint64_t file_size, const ReadAt& read_at, const std::string& source) {
  const Directory dir = locate_directory(file_size, read_at, source);
  const std::string bytes = read_at(dir.offset, static_cast<std::size_t>(dir.size));
  std::vector<ZipEntry> entries;
  std::size_t at = 0;
  for (std::uint64_t i = 0; i < dir.entries; ++i) {
    if (at + kEntryHeaderSize > bytes.size() || field(bytes, at, 4) != kDirectoryEntry)
      malformed(source, "central directory entry " + std::to_string(i) + " is damaged");
    const auto name_len = field(bytes, at + 28, 2), extra_len = field(bytes, at + 30, 2),
               comment_len = field(bytes, at + 32, 2);
    if (at + kEntryHeaderSize + name_len + extra_len + comment_len > bytes.size())
      malformed(source, "central directory entry " + std::to_string(i) + " runs past the directory");
    ZipEntry entry;
    entry.method = static_cast<std::uint16_t>(field(bytes, at + 10, 2));
    entry.compressed_size = field(bytes, at + 20, 4);
    entry.uncompressed_size = field(bytes, at + 24, 4);
    entry.name = bytes.substr(at + kEntryHeaderSize, name_len);
    read_zip64_sizes(std::string_view(bytes).substr(at + kEntryHeaderSize + name_len, extra_len), entry, source);
    entries.push_back(std::move(entry));
    at += kEntryHeaderSize + name_len + extra_len + comment_len;
  }
  return entries;
}

void check_zip_sizes(const std::vector<ZipEntry>& entries, std::uint64_t file_size, const std::string& source,
                     std::uint64_t max_ratio) {
  const std::uint64_t limit = file_size * max_ratio + (1u << 20);
  std::uint64_t declared = 0;
  for (const auto& e : entries) {
    if (e.method != 0 && e.method != 8)
      throw DataError(source + ": entry '" + e.name + "' uses zip compression method " + std::to_string(e.method) +
                      " (only stored and deflate are read)");
    if (e.method == 0 && e.compressed_size != e.uncompressed_size)
      throw DataError(source + ": stored entry '" + e.name + "' declares two different sizes");
    if (e.uncompressed_size > limit || declared + e.uncompressed_size > limit)
      throw DataError(source + ": declares more than " + std::to_string(limit) + " bytes uncompressed in a " +
                      std::to_string(file_size) + "-byte file (entry '" + e.name + "'): a zip bomb, or damaged");
    declared += e.uncompressed_size;
  }
}

}  // namespace shoplens::detail
