// Test images: a deterministic photo-like picture, its encodings in every decoded format (some
// written byte by byte here, so a test controls every header field), and the damaged files that
// broken uploads and storage produce (each named after what it does to the bytes).
#pragma once

#include <cstdint>
#include <vector>

#include <opencv2/core/mat.hpp>

#include "shoplens/core/config.h"

namespace shoplens::testing {

// An augmentation that only crops and resizes to `size`: no flip, no colour jitter. With
// `whole_image` the crop is the whole picture at its own aspect, so only the resize is left.
AugmentConfig plain_augment(int size = 32, bool whole_image = false);

using Bytes = std::vector<std::uint8_t>;

// Gradients, a disc and mild noise (RGB, CV_8UC3): compresses like a photo, differs per seed.
cv::Mat test_picture(int width, int height, int seed);

Bytes png_bytes(const cv::Mat& rgb);
Bytes webp_bytes(const cv::Mat& rgb, bool lossless = false);  // lossy at quality 80

// A PNG of any layout, written chunk by chunk. `samples` holds width * height * channels values
// (channels from the colour type: 1 gray or palette, 2 gray+alpha, 3 RGB, 4 RGBA) of `bit_depth`
// bits, row-major; `palette` holds RGB triplets for colour type 3 and `trns` the tRNS chunk body.
struct PngSpec {
  int width = 0, height = 0, bit_depth = 8, color_type = 2;
  bool interlaced = false;
  std::vector<std::uint16_t> samples;
  Bytes palette, trns;
};
Bytes png_from_spec(const PngSpec& spec);

// Baseline TIFF: uncompressed RGB, one strip, little-endian.
Bytes tiff_bytes(const cv::Mat& rgb);

// A BMP with a 40-byte header: `bits` 24 or 32 (BI_RGB) stores `rgb`; 8 stores `indices`
// (CV_8UC1) with `palette` (RGB triplets). Negative height (top-down) when `top_down`.
Bytes bmp_bytes(const cv::Mat& rgb, int bits, bool top_down);
Bytes bmp8_bytes(const cv::Mat& indices, const std::vector<cv::Vec3b>& palette, bool top_down);

// A one-component (grayscale) JPEG of `rgb`: TurboJPEG keeps only its luma.
Bytes gray_jpeg(const cv::Mat& rgb, int quality);

// A valid, all-black PNG of any size (1-bit grayscale, streamed through zlib): it decodes in full
// to width x height RGB pixels, yet 9990 x 9990 is 13 KB of file, as an attacker's would be.
Bytes blank_png(std::uint32_t width, std::uint32_t height);

// Small files whose headers declare width x height pixels they do not hold.
// 32x32 CMYK in four flat quadrants, as Adobe stores it (YCCK); `plain_cmyk`: read as plain CMYK.
Bytes cmyk_jpeg(bool plain_cmyk);
Bytes jpeg_declaring(std::uint32_t width, std::uint32_t height);
Bytes png_declaring(std::uint32_t width, std::uint32_t height);
Bytes webp_declaring(std::uint32_t width, std::uint32_t height);  // extended (VP8X) canvas
Bytes tiff_declaring(std::uint32_t width, std::uint32_t height);
Bytes bmp_declaring(std::uint32_t width, std::uint32_t height);

void put_u16le(Bytes& bytes, std::size_t at, std::uint32_t value);
void put_u32le(Bytes& bytes, std::size_t at, std::uint32_t value);

// The first `fraction` of the file.
Bytes truncated(const Bytes& bytes, double fraction);
// A JPEG cut 12 bytes into its first Huffman table segment (DHT).
Bytes jpeg_cut_inside_huffman_table(const Bytes& jpeg);
// A JPEG cut just before its scan (SOS): complete headers, no image data.
Bytes jpeg_cut_before_scan(const Bytes& jpeg);
// The JPEG signature (FF D8 FF) followed by garbage where the segment headers were.
Bytes jpeg_with_garbage_header(const Bytes& jpeg);
// A JPEG whose first Huffman table declares more codes than a table can hold.
Bytes jpeg_with_bogus_huffman_table(const Bytes& jpeg);
Bytes text_bytes();  // an HTML error page
// The file's first `keep` bytes (its signature, so it is still sniffed as its format) followed by
// garbage where the rest of its header was (up to byte 64).
Bytes with_garbage_header(const Bytes& bytes, std::size_t keep);
// `flips` single-bit errors at positions drawn from `seed`, past the first `keep` bytes (storage
// and transfer damage that leaves the signature alone).
Bytes with_bit_flips(const Bytes& bytes, int flips, int seed, std::size_t keep);

}  // namespace shoplens::testing
