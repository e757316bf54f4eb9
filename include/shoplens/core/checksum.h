// The checksums of ShopLens files: CRC-32 (zlib's; shards, checkpoints, exported models) and
// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78; TFRecord framing of TensorBoard events).
#pragma once

#include <cstddef>
#include <cstdint>

namespace shoplens {

// CRC-32 of `size` bytes, continuing `crc` (the value returned for the bytes before).
std::uint32_t crc32_of(const void* data, std::size_t size, std::uint32_t crc = 0);

// Continues `crc` (the value returned for the bytes before) over `size` more bytes.
std::uint32_t crc32c_extend(std::uint32_t crc, const void* data, std::size_t size);
inline std::uint32_t crc32c(const void* data, std::size_t size) { return crc32c_extend(0, data, size); }

// TFRecord stores CRCs masked, because a CRC of data that itself holds CRCs is weak.
inline std::uint32_t mask_crc32c(std::uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

}  // namespace shoplens
