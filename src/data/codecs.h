// The per-format decoders behind decode_image (image_io.h). Each one reads the declared size
// from the file's header and passes it to check_declared_size before it allocates or decodes
// anything, and throws DataError with a reason fit for a quarantine report.
#pragma once

#include <cstddef>
#include <cstdint>

#include "shoplens/data/image_io.h"

namespace shoplens::codecs {

// Refuses a header that declares no pixels or more than options.max_megapixels.
void check_declared_size(ImageFormat format, std::uint64_t width, std::uint64_t height, const DecodeOptions& options);

// Tells options.before_allocating (if any) that `bytes` of pixels are about to be allocated: every
// decoder calls it once, after check_declared_size, with all it will hold at once.
void announce_allocation(const DecodeOptions& options, std::uint64_t bytes);

// A full-size result with its RGB pixels allocated, to be filled; only after check_declared_size.
DecodedImage allocate_image(ImageFormat format, std::uint64_t width, std::uint64_t height);

DecodedImage decode_jpeg(const std::uint8_t* data, std::size_t size, const DecodeOptions& options);  // TurboJPEG
DecodedImage decode_png(const std::uint8_t* data, std::size_t size, const DecodeOptions& options);   // libpng
DecodedImage decode_webp(const std::uint8_t* data, std::size_t size, const DecodeOptions& options);  // libwebp
DecodedImage decode_tiff(const std::uint8_t* data, std::size_t size, const DecodeOptions& options);  // libtiff
DecodedImage decode_bmp(const std::uint8_t* data, std::size_t size, const DecodeOptions& options);   // our own

}  // namespace shoplens::codecs
