// What the image and the text shard index formats share after their headers: a body of
// fixed-size entries whose count the header states and whose bytes a CRC-32 covers. Pure over
// bytes, like the parsers that use it (both are fuzzed).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "shoplens/data/shard_format.h"

namespace shoplens {

// The entries after a header of `header_size` bytes (size >= header_size, checked by the caller);
// `fail(why)` returns the format's exception, thrown for a count that does not match the body or
// a checksum that does not match the bytes.
template <class Entry, class Fail>
std::vector<Entry> read_index_entries(const std::uint8_t* bytes, std::size_t size, std::size_t header_size,
                                      std::uint64_t count, std::uint32_t entries_crc32, const Fail& fail) {
  const std::size_t body = size - header_size;
  if (count > body / sizeof(Entry) || body != count * sizeof(Entry))
    throw fail("header says " + std::to_string(count) + " entries but the file holds " + std::to_string(body) +
               " bytes of entries");
  const std::uint8_t* first = bytes + header_size;
  if (crc32_of(first, body) != entries_crc32) throw fail("entries checksum mismatch (torn or corrupted index)");
  std::vector<Entry> entries(static_cast<std::size_t>(count));
  if (body) std::memcpy(entries.data(), first, body);
  return entries;
}

}  // namespace shoplens
