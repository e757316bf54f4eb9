// Image decoding and encoding. JPEG goes through libjpeg-turbo's TurboJPEG API, which can decode
// at 1/2, 1/4 or 1/8 scale in the DCT domain (much cheaper than a full decode and a resize);
// other formats go through OpenCV. Decoding is strict: a truncated or damaged file is an error,
// never a half-grey image.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <opencv2/core/mat.hpp>

namespace shoplens {

enum class ImageFormat { kUnknown, kJpeg, kPng, kBmp, kWebp, kTiff, kGif };
const char* format_name(ImageFormat format);
ImageFormat sniff_format(const std::uint8_t* data, std::size_t size);
ImageFormat format_from_extension(const std::filesystem::path& path);

struct DecodeOptions {
  int min_short_side = 0;         // >0: JPEG may be decoded at a reduced scale down to this short side
  double max_megapixels = 100.0;  // larger images are refused before decoding
};

struct DecodedImage {
  cv::Mat rgb;                    // CV_8UC3, RGB order
  int original_width = 0;
  int original_height = 0;
  ImageFormat format = ImageFormat::kUnknown;
  int scale_denominator = 1;      // 1, 2, 4 or 8 when a JPEG was decoded at reduced scale
};

// Throws DataError with a reason suitable for a quarantine report (the caller adds the file).
DecodedImage decode_image(const std::uint8_t* data, std::size_t size, const DecodeOptions& options = {});

// Decodes a stored payload of known size quickly (no sniffing, no scaling); throws DataError.
void decode_jpeg_into(const std::uint8_t* data, std::size_t size, cv::Mat& rgb);

std::vector<std::uint8_t> encode_jpeg(const cv::Mat& rgb, int quality);

// Shrinks so the short side is `short_side` (never enlarges), capping the long side at
// `max_long_side` for extreme aspect ratios. INTER_AREA: the right filter for downscaling.
cv::Mat resize_short_side(const cv::Mat& rgb, int short_side, int max_long_side);

std::vector<std::uint8_t> read_binary_file(const std::filesystem::path& path);

}  // namespace shoplens
