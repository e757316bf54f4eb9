#include "shoplens/core/checksum.h"

#include <zlib.h>

#include <algorithm>
#include <array>

namespace shoplens {

std::uint32_t crc32_of(const void* data, std::size_t size, std::uint32_t crc) {
  const auto* p = static_cast<const Bytef*>(data);
  // zlib's crc32 takes a uInt length; feed large buffers in pieces.
  while (size > 0) {
    const auto chunk = static_cast<uInt>(std::min<std::size_t>(size, 1u << 30));
    crc = static_cast<std::uint32_t>(::crc32(crc, p, chunk));
    p += chunk;
    size -= chunk;
  }
  return crc;
}

namespace {

// Byte-at-a-time table: event files are small, simplicity beats slicing-by-8 here.
constexpr std::array<std::uint32_t, 256> make_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int bit = 0; bit < 8; ++bit) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
  return table;
}

constexpr auto kTable = make_table();

}  // namespace

std::uint32_t crc32c_extend(std::uint32_t crc, const void* data, std::size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint32_t c = ~crc;
  for (std::size_t i = 0; i < size; ++i) c = kTable[(c ^ p[i]) & 0xFFu] ^ (c >> 8);
  return ~c;
}

}  // namespace shoplens
