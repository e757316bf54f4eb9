// Image decoding and encoding, on small codec libraries (not OpenCV's image codecs): JPEG through
// libjpeg-turbo's TurboJPEG API, which can decode at 1/2, 1/4 or 1/8 scale in the DCT domain
// (much cheaper than a full decode and a resize); PNG through libpng, WebP through libwebp, TIFF
// through libtiff, and uncompressed BMP by our own reader. Every decoder refuses an image whose
// header declares more than DecodeOptions::max_megapixels before it allocates anything.
// Decoding is strict: a truncated or damaged file is an error, never a half-grey image.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
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
  // JPEG: libjpeg's accurate integer DCT (its default, and Pillow's) instead of the fast one, so
  // pixels equal what torchvision's PIL loader sees. Inference wants that; training does not care.
  bool accurate_dct = false;
  // Called with the bytes of pixel memory a decoder is about to allocate (the decoded image and any
  // full-size working copy), once its size is checked and before anything is allocated: it may
  // wait for room, or throw to refuse the image (the server's budget of decoded pixels in flight).
  std::function<void(std::uint64_t bytes)> before_allocating;
};

struct DecodedImage {
  cv::Mat rgb;  // CV_8UC3, RGB order
  int original_width = 0;
  int original_height = 0;
  ImageFormat format = ImageFormat::kUnknown;
  int scale_denominator = 1;  // 1, 2, 4 or 8 when a JPEG was decoded at reduced scale
  // The input bytes are a shard payload as they are: decode_jpeg_into gives exactly `rgb` (a
  // JPEG at full scale that is not CMYK/YCCK, which only the full decoder converts).
  bool usable_as_payload = false;
};

// Throws DataError with a reason suitable for a quarantine report (the caller adds the file).
DecodedImage decode_image(const std::uint8_t* data, std::size_t size, const DecodeOptions& options = {});

// Decodes a stored payload of known size quickly (no sniffing, no scaling); throws DataError.
void decode_jpeg_into(const std::uint8_t* data, std::size_t size, cv::Mat& rgb);

// The order of the channels of a CV_8UC3 image handed to an encoder: OpenCV's drawing code (the
// synthetic catalog, the loader preview) works in BGR.
enum class ChannelOrder { kRgb, kBgr };

struct JpegEncodeOptions {
  int quality = 90;
  ChannelOrder order = ChannelOrder::kRgb;
  bool fast_dct = true;  // false: libjpeg's accurate integer DCT (its default, and OpenCV's); TurboJPEG
                         // uses it anyway at quality 96 and above
};

// 4:2:0 chroma subsampling. The quality-only form is the shard encoder: RGB, fast DCT.
std::vector<std::uint8_t> encode_jpeg(const cv::Mat& image, const JpegEncodeOptions& options);
std::vector<std::uint8_t> encode_jpeg(const cv::Mat& rgb, int quality);

struct PngEncodeOptions {
  int compression_level = 6;  // zlib's 0-9
  bool huffman_only = false;  // zlib's Z_HUFFMAN_ONLY: photos gain little from LZ77 matching, it is much faster
  ChannelOrder order = ChannelOrder::kRgb;
};

std::vector<std::uint8_t> encode_png(const cv::Mat& image, const PngEncodeOptions& options = {});

// PNG, or JPEG at quality 95 for a .jpg/.jpeg name; throws UsageError for any other extension.
void write_image_file(const std::filesystem::path& path, const cv::Mat& image, ChannelOrder order);

// Shrinks so the short side is `short_side` (never enlarges), capping the long side at
// `max_long_side` for extreme aspect ratios. INTER_AREA: the right filter for downscaling.
cv::Mat resize_short_side(const cv::Mat& rgb, int short_side, int max_long_side);

// The whole file, when it is a regular file (core/regular_file.h: a FIFO or device is never
// opened); DataError with the reason ("cannot read file: ...", "not a regular file (a FIFO)").
std::vector<std::uint8_t> read_binary_file(const std::filesystem::path& path);

}  // namespace shoplens
