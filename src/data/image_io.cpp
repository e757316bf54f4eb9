#include "shoplens/data/image_io.h"

#include <cmath>
#include <cstdio>

#include <opencv2/imgproc.hpp>

#include "codecs.h"
#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/regular_file.h"
#include "shoplens/core/strings.h"
#include "shoplens/core/enum_names.h"

namespace shoplens {
namespace codecs {
namespace {

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", value);
  return text;
}

}  // namespace

void check_declared_size(ImageFormat format, std::uint64_t width, std::uint64_t height, const DecodeOptions& options) {
  const std::string size = std::to_string(width) + "x" + std::to_string(height);
  if (width == 0 || height == 0) throw DataError(std::string(format_name(format)) + " has no pixels (" + size + ")");
  // Whatever the limit, a side must fit the int of a cv::Mat and keep every row-size product
  // of the decoders far from overflowing.
  constexpr std::uint64_t kMaxSide = std::uint64_t{1} << 24;
  const double megapixels = static_cast<double>(width) * static_cast<double>(height) / 1e6;
  if (megapixels > options.max_megapixels || width > kMaxSide || height > kMaxSide)
    throw DataError("image too large: " + size + " " + format_name(format) + " (" + number(megapixels) +
                    " megapixels) exceeds the limit of " + number(options.max_megapixels) + " megapixels");
}

void announce_allocation(const DecodeOptions& options, std::uint64_t bytes) {
  if (options.before_allocating) options.before_allocating(bytes);
}

DecodedImage allocate_image(ImageFormat format, std::uint64_t width, std::uint64_t height) {
  DecodedImage out;
  out.format = format;
  out.original_width = static_cast<int>(width);
  out.original_height = static_cast<int>(height);
  out.rgb.create(out.original_height, out.original_width, CV_8UC3);
  return out;
}

}  // namespace codecs

const char* format_name(ImageFormat format) {
  static constexpr EnumName<ImageFormat> kNames[] = {{ImageFormat::kJpeg, "JPEG"}, {ImageFormat::kPng, "PNG"},
                                                     {ImageFormat::kBmp, "BMP"},   {ImageFormat::kWebp, "WebP"},
                                                     {ImageFormat::kTiff, "TIFF"}, {ImageFormat::kGif, "GIF"}};
  return name_in(kNames, format, "unknown");
}

ImageFormat sniff_format(const std::uint8_t* d, std::size_t n) {
  if (n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF) return ImageFormat::kJpeg;
  if (n >= 8 && std::memcmp(d, "\x89PNG\r\n\x1a\n", 8) == 0) return ImageFormat::kPng;
  if (n >= 2 && d[0] == 'B' && d[1] == 'M') return ImageFormat::kBmp;
  if (n >= 12 && std::memcmp(d, "RIFF", 4) == 0 && std::memcmp(d + 8, "WEBP", 4) == 0) return ImageFormat::kWebp;
  if (n >= 4 && (std::memcmp(d, "II*\0", 4) == 0 || std::memcmp(d, "MM\0*", 4) == 0)) return ImageFormat::kTiff;
  if (n >= 4 && (std::memcmp(d, "II+\0", 4) == 0 || std::memcmp(d, "MM\0+", 4) == 0))
    return ImageFormat::kTiff;  // BigTIFF
  if (n >= 6 && (std::memcmp(d, "GIF87a", 6) == 0 || std::memcmp(d, "GIF89a", 6) == 0)) return ImageFormat::kGif;
  return ImageFormat::kUnknown;
}

ImageFormat format_from_extension(const std::filesystem::path& path) {
  std::string ext = to_lower(path.extension().string());
  if (ext == ".jpg" || ext == ".jpeg") return ImageFormat::kJpeg;
  if (ext == ".png") return ImageFormat::kPng;
  if (ext == ".bmp") return ImageFormat::kBmp;
  if (ext == ".webp") return ImageFormat::kWebp;
  if (ext == ".tif" || ext == ".tiff") return ImageFormat::kTiff;
  if (ext == ".gif") return ImageFormat::kGif;
  return ImageFormat::kUnknown;
}

DecodedImage decode_image(const std::uint8_t* data, std::size_t size, const DecodeOptions& options) {
  if (size == 0) throw DataError("empty file (0 bytes)");
  switch (sniff_format(data, size)) {
    case ImageFormat::kJpeg:
      return codecs::decode_jpeg(data, size, options);
    case ImageFormat::kPng:
      return codecs::decode_png(data, size, options);
    case ImageFormat::kWebp:
      return codecs::decode_webp(data, size, options);
    case ImageFormat::kTiff:
      return codecs::decode_tiff(data, size, options);
    case ImageFormat::kBmp:
      return codecs::decode_bmp(data, size, options);
    case ImageFormat::kGif:
      throw DataError("GIF is not supported (convert to PNG or JPEG)");
    case ImageFormat::kUnknown:
      break;
  }
  throw DataError("not an image (unrecognised content)");
}

void write_image_file(const std::filesystem::path& path, const cv::Mat& image, ChannelOrder order) {
  std::vector<std::uint8_t> bytes;
  switch (format_from_extension(path)) {
    case ImageFormat::kPng: {
      PngEncodeOptions options;
      options.order = order;
      bytes = encode_png(image, options);
      break;
    }
    case ImageFormat::kJpeg: {
      JpegEncodeOptions options;
      options.quality = 95;
      options.order = order;
      options.fast_dct = false;
      bytes = encode_jpeg(image, options);
      break;
    }
    default:
      throw UsageError("cannot write '" + path.string() + "': name it .png, .jpg or .jpeg");
  }
  write_file_atomic(path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

cv::Mat resize_short_side(const cv::Mat& rgb, int short_side, int max_long_side) {
  const int w = rgb.cols, h = rgb.rows;
  double scale = static_cast<double>(short_side) / std::min(w, h);
  scale = std::min(scale, static_cast<double>(max_long_side) / std::max(w, h));
  if (scale >= 1.0) return rgb;
  const int nw = std::max(1, static_cast<int>(std::lround(w * scale)));
  const int nh = std::max(1, static_cast<int>(std::lround(h * scale)));
  cv::Mat out;
  cv::resize(rgb, out, cv::Size(nw, nh), 0, 0, cv::INTER_AREA);
  return out;
}

std::vector<std::uint8_t> read_binary_file(const std::filesystem::path& path) {
  // Regular files only (core/regular_file.h): a FIFO or a device is never opened.
  const RegularFile file = open_regular_file(path);
  if (!file.problem.empty()) throw DataError(file.problem);
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(file.size));
  bytes.resize(read_fully(file.fd.get(), bytes.data(), bytes.size()));
  return bytes;
}

}  // namespace shoplens
