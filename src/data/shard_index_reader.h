// What the image and the text shard index parsers share: the common header prefix (magic, version,
// entry size), a body of fixed-size entries whose count the header states and whose bytes a CRC-32
// covers, and records that lie back to back in the payload and cover it exactly. Pure over bytes,
// like the parsers that use it (both are fuzzed).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "shoplens/data/shard_core.h"

namespace shoplens {

// Copies the header out of `bytes` and returns the entries after it. `fail(why)` returns the
// format's exception, thrown for a file shorter than the header, another format or version, an
// entry size, count or checksum that does not match the body.
template <class Header, class Entry, class Fail>
std::vector<Entry> read_shard_index(const std::uint8_t* bytes, std::size_t size, const ShardFormat& format,
                                    Header& header, const Fail& fail) {
  if (size < sizeof(Header))
    throw fail("file is " + std::to_string(size) + " bytes, shorter than the " + std::to_string(sizeof(Header)) +
               "-byte header");
  std::memcpy(&header, bytes, sizeof(Header));
  const ShardIndexPrefix& prefix = prefix_of(header);
  if (std::memcmp(prefix.magic, format.magic, sizeof prefix.magic) != 0)
    throw fail(std::string("bad magic (not a ShopLens ") + format.index_kind + ")");
  if (prefix.version != format.version)
    throw fail("version " + std::to_string(prefix.version) + " is not supported (expected " +
               std::to_string(format.version) + ")");
  if (prefix.entry_size != sizeof(Entry))
    throw fail("entry size " + std::to_string(prefix.entry_size) + " != " + std::to_string(sizeof(Entry)));
  const std::size_t body = size - sizeof(Header);
  if (prefix.count > body / sizeof(Entry) || body != prefix.count * sizeof(Entry))
    throw fail("header says " + std::to_string(prefix.count) + " entries but the file holds " + std::to_string(body) +
               " bytes of entries");
  const std::uint8_t* first = bytes + sizeof(Header);
  if (crc32_of(first, body) != prefix.entries_crc32) throw fail("entries checksum mismatch (torn or corrupted index)");
  std::vector<Entry> entries(static_cast<std::size_t>(prefix.count));
  if (body) std::memcpy(entries.data(), first, body);
  return entries;
}

// "entry <i> (sample <id>): ", the start of an error about one entry.
template <class Entry>
std::string entry_place(std::size_t i, const Entry& e) {
  return "entry " + std::to_string(i) + " (sample " + std::to_string(e.sample_id) + "): ";
}

// Every record non-empty, starting where the one before ended, inside the payload, which the
// records cover exactly (`offset` and `length` in the payload's unit), and in a known split.
template <class Entry, class Fail>
void check_record_extents(const std::vector<Entry>& entries, std::uint64_t payload_size, const ShardFormat& format,
                          const Fail& fail) {
  std::uint64_t expected_offset = 0;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    if (e.offset != expected_offset)
      throw fail(entry_place(i, e) + "records must be contiguous (offset " + std::to_string(e.offset) + ", expected " +
                 std::to_string(expected_offset) + ")");
    if (e.length == 0) throw fail(entry_place(i, e) + "empty record");
    if (e.length > payload_size - e.offset)
      throw fail(entry_place(i, e) + format.payload_unit + " [" + std::to_string(e.offset) + ", +" +
                 std::to_string(e.length) + ") lie past the end of the " + format.payload_file + " (" +
                 std::to_string(payload_size) + " " + format.payload_unit + ")");
    if (e.split > 2) throw fail(entry_place(i, e) + "unknown split " + std::to_string(e.split));
    expected_offset = e.offset + e.length;
  }
  if (expected_offset != payload_size)
    throw fail(std::string("records do not cover the ") + format.payload_file + " exactly");
}

}  // namespace shoplens
