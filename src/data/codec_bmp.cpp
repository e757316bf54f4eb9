// BMP, our own reader for the variants that hold plain pixels: uncompressed 24-bit and 32-bit
// (BI_RGB, or BI_BITFIELDS with the standard masks) and 8-bit palette images, bottom-up or
// top-down, with a Windows header of 40 to 124 bytes. RLE, 1/4/16-bit, embedded JPEG/PNG and
// OS/2 files are refused as unsupported. Every offset and size comes from the file and is checked
// against the file's length in 64-bit arithmetic before it is used.
#include <string>
#include <vector>

#include "codecs.h"
#include "shoplens/core/errors.h"

namespace shoplens::codecs {
namespace {

constexpr std::size_t kFileHeaderSize = 14;
constexpr std::uint32_t kBiRgb = 0, kBiBitfields = 3;

std::uint32_t u32_at(const std::uint8_t* p) { return p[0] | p[1] << 8 | p[2] << 16 | std::uint32_t{p[3]} << 24; }
std::uint16_t u16_at(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] | p[1] << 8); }

[[noreturn]] void unsupported(const std::string& what) { throw DataError("unsupported BMP variant (" + what + ")"); }
[[noreturn]] void corrupt(const std::string& what) { throw DataError("corrupt BMP: " + what); }

struct BmpHeader {
  std::uint64_t pixel_offset = 0;
  std::uint32_t info_size = 0;
  std::uint64_t width = 0, height = 0;
  bool top_down = false;
  std::uint16_t bits = 0;
  std::uint32_t compression = 0;
  std::uint32_t colours_used = 0;
};

BmpHeader read_header(const std::uint8_t* d, std::size_t size) {
  if (size < kFileHeaderSize + 4) corrupt("the file ends inside its header");
  BmpHeader h;
  h.pixel_offset = u32_at(d + 10);
  h.info_size = u32_at(d + 14);
  if (h.info_size == 12) unsupported("OS/2 1.x header");
  if (h.info_size == 64) unsupported("OS/2 2.x header");
  if (h.info_size != 40 && h.info_size != 52 && h.info_size != 56 && h.info_size != 108 && h.info_size != 124)
    unsupported("header of " + std::to_string(h.info_size) + " bytes");
  if (size < kFileHeaderSize + h.info_size) corrupt("the file ends inside its header");
  const auto width = static_cast<std::int32_t>(u32_at(d + 18));
  const auto height = static_cast<std::int32_t>(u32_at(d + 22));
  if (width < 0) corrupt("negative width " + std::to_string(width));
  h.top_down = height < 0;
  h.width = static_cast<std::uint64_t>(width);
  // Negated in 64 bits: INT32_MIN has no 32-bit negation.
  h.height = static_cast<std::uint64_t>(h.top_down ? -static_cast<std::int64_t>(height) : height);
  if (u16_at(d + 26) != 1) corrupt("planes must be 1");
  h.bits = u16_at(d + 28);
  h.compression = u32_at(d + 30);
  h.colours_used = u32_at(d + 46);
  return h;
}

// BI_BITFIELDS masks sit right after the 40-byte part of the header whatever its declared size.
bool has_standard_masks(const std::uint8_t* d, std::size_t size) {
  if (size < kFileHeaderSize + 40 + 12) corrupt("the file ends inside its channel masks");
  const std::uint8_t* masks = d + kFileHeaderSize + 40;
  return u32_at(masks) == 0x00FF0000 && u32_at(masks + 4) == 0x0000FF00 && u32_at(masks + 8) == 0x000000FF;
}

void check_variant(const BmpHeader& h, const std::uint8_t* d, std::size_t size) {
  static const char* const kCompression[] = {"BI_RGB", "BI_RLE8", "BI_RLE4", "BI_BITFIELDS", "BI_JPEG", "BI_PNG"};
  const std::string name =
      h.compression < 6 ? kCompression[h.compression] : "compression " + std::to_string(h.compression);
  const std::string variant = std::to_string(h.bits) + "-bit, " + name;
  if (h.compression == kBiRgb && (h.bits == 8 || h.bits == 24 || h.bits == 32)) return;
  if (h.compression == kBiBitfields && h.bits == 32) {
    if (has_standard_masks(d, size)) return;
    unsupported(variant + " with non-standard channel masks");
  }
  unsupported(variant);
}

// The palette as RGB triplets; pixel values at or past its size are damage.
std::vector<cv::Vec3b> read_palette(const BmpHeader& h, const std::uint8_t* d, std::size_t size) {
  const std::uint64_t count = h.colours_used == 0 ? 256 : h.colours_used;
  if (count > 256) corrupt(std::to_string(count) + " palette entries for 8-bit pixels");
  const std::uint64_t start = kFileHeaderSize + h.info_size;
  if (start + 4 * count > size || start + 4 * count > h.pixel_offset) corrupt("the palette runs past the pixel data");
  std::vector<cv::Vec3b> palette(count);
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::uint8_t* entry = d + start + 4 * i;  // blue, green, red, reserved
    palette[i] = cv::Vec3b(entry[2], entry[1], entry[0]);
  }
  return palette;
}

// Rows are padded to 4 bytes; the last row's padding may be missing without losing a pixel.
void check_pixel_data_fits(const BmpHeader& h, std::size_t size) {
  const std::uint64_t row_bytes = (h.width * h.bits + 7) / 8;
  const std::uint64_t stride = (h.width * h.bits + 31) / 32 * 4;
  const std::uint64_t needed = stride * (h.height - 1) + row_bytes;  // no overflow: sides are capped
  if (h.pixel_offset < kFileHeaderSize + h.info_size) corrupt("the pixel data starts inside the header");
  if (h.pixel_offset > size || needed > size - h.pixel_offset)
    corrupt("pixel data needs " + std::to_string(needed) + " bytes from offset " + std::to_string(h.pixel_offset) +
            ", the file has " + std::to_string(size));
}

void decode_rows(const BmpHeader& h, const std::uint8_t* d, const std::vector<cv::Vec3b>& palette, cv::Mat& rgb) {
  const std::size_t stride = (h.width * h.bits + 31) / 32 * 4;
  const std::size_t pixel_bytes = h.bits / 8;
  for (int y = 0; y < rgb.rows; ++y) {
    const std::size_t file_row = h.top_down ? static_cast<std::size_t>(y) : h.height - 1 - static_cast<std::size_t>(y);
    const std::uint8_t* in = d + h.pixel_offset + file_row * stride;
    auto* out = rgb.ptr<cv::Vec3b>(y);
    for (int x = 0; x < rgb.cols; ++x, in += pixel_bytes) {
      if (h.bits != 8) {
        out[x] = cv::Vec3b(in[2], in[1], in[0]);  // stored blue, green, red (and unused alpha)
      } else if (*in < palette.size()) {
        out[x] = palette[*in];
      } else {
        corrupt("pixel value " + std::to_string(*in) + " outside its " + std::to_string(palette.size()) +
                "-colour palette");
      }
    }
  }
}

}  // namespace

DecodedImage decode_bmp(const std::uint8_t* data, std::size_t size, const DecodeOptions& options) {
  const BmpHeader header = read_header(data, size);
  check_declared_size(ImageFormat::kBmp, header.width, header.height, options);
  check_variant(header, data, size);
  const std::vector<cv::Vec3b> palette = header.bits == 8 ? read_palette(header, data, size) : std::vector<cv::Vec3b>{};
  check_pixel_data_fits(header, size);
  announce_allocation(options, std::uint64_t{header.width} * header.height * 3);
  DecodedImage out = allocate_image(ImageFormat::kBmp, header.width, header.height);
  decode_rows(header, data, palette, out.rgb);
  return out;
}

}  // namespace shoplens::codecs
