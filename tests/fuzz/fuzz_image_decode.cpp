// libFuzzer target: every image decoder (JPEG, PNG, WebP, TIFF, BMP) must answer any bytes with
// an RGB image of the size its header declared (or smaller, for a DCT-scaled JPEG), or a
// DataError; never a crash, an overrun or another exception.
#include <cstddef>
#include <cstdint>

#include "shoplens/core/errors.h"
#include "shoplens/data/image_io.h"

namespace {

void decode_checked(const std::uint8_t* data, std::size_t size, int min_short_side) {
  shoplens::DecodeOptions options;
  options.max_megapixels = 4;  // keeps each input's memory small; the check itself is exercised
  options.min_short_side = min_short_side;
  try {
    const shoplens::DecodedImage d = shoplens::decode_image(data, size, options);
    if (d.rgb.type() != CV_8UC3 || d.rgb.empty()) __builtin_trap();
    const bool full_size = d.rgb.cols == d.original_width && d.rgb.rows == d.original_height;
    if (min_short_side == 0 ? !full_size : d.rgb.cols > d.original_width || d.rgb.rows > d.original_height)
      __builtin_trap();
  } catch (const shoplens::DataError&) {}
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  decode_checked(data, size, 0);
  decode_checked(data, size, 8);  // the DCT-scaled JPEG path
  return 0;
}
