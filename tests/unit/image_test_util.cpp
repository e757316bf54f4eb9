#include "image_test_util.h"

#include <turbojpeg.h>
#include <webp/encode.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>

#include <opencv2/imgproc.hpp>

#include "shoplens/data/image_io.h"

namespace shoplens::testing {

AugmentConfig plain_augment(int size, bool whole_image) {
  AugmentConfig c;
  c.image_size = size;
  c.hflip = 0;
  c.brightness = c.contrast = c.saturation = c.hue = 0;
  if (whole_image) c.crop_scale = c.crop_ratio = {1.0, 1.0};
  return c;
}
namespace {

// Offset of the first FF <marker> pair; throws when the file has none (a broken test input).
std::size_t find_marker(const Bytes& jpeg, std::uint8_t marker) {
  for (std::size_t i = 2; i + 1 < jpeg.size(); ++i)
    if (jpeg[i] == 0xFF && jpeg[i + 1] == marker) return i;
  throw std::logic_error("test JPEG has no marker " + std::to_string(marker));
}

void append_u32be(Bytes& bytes, std::uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<std::uint8_t>(value >> shift));
}

void append_png_chunk(Bytes& png, const char* type, const Bytes& body) {
  append_u32be(png, static_cast<std::uint32_t>(body.size()));
  png.insert(png.end(), type, type + 4);
  png.insert(png.end(), body.begin(), body.end());
  uLong crc = crc32(0, reinterpret_cast<const Bytef*>(type), 4);
  if (!body.empty()) crc = crc32(crc, body.data(), static_cast<uInt>(body.size()));  // a null buffer resets it
  append_u32be(png, static_cast<std::uint32_t>(crc));
}

int png_channels(int color_type) {
  static const std::array<int, 7> kChannels = {1, 0, 3, 1, 2, 0, 4};
  return kChannels.at(static_cast<std::size_t>(color_type));
}

// Filter byte 0 (none), then the samples of row y at columns x0, x0 + dx, ... packed MSB first.
void append_png_row(Bytes& raw, const PngSpec& s, int y, int x0, int dx) {
  const int channels = png_channels(s.color_type);
  raw.push_back(0);
  unsigned bits = 0, count = 0;
  for (int x = x0; x < s.width; x += dx)
    for (int c = 0; c < channels; ++c) {
      const std::uint16_t v = s.samples.at((static_cast<std::size_t>(y) * s.width + x) * channels + c);
      if (s.bit_depth == 16) {
        raw.push_back(static_cast<std::uint8_t>(v >> 8));
        raw.push_back(static_cast<std::uint8_t>(v));
        continue;
      }
      bits = bits << s.bit_depth | v;
      count += static_cast<unsigned>(s.bit_depth);
      if (count == 8) {
        raw.push_back(static_cast<std::uint8_t>(bits));
        bits = count = 0;
      }
    }
  if (count > 0) raw.push_back(static_cast<std::uint8_t>(bits << (8 - count)));
}

// The filtered image data: one pass, or Adam7's seven (x0, y0, dx, dy) passes.
Bytes png_scanlines(const PngSpec& s) {
  static const int kAdam7[7][4] = {{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4},
                                   {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}};
  static const int kWhole[1][4] = {{0, 0, 1, 1}};
  Bytes raw;
  const int passes = s.interlaced ? 7 : 1;
  for (int p = 0; p < passes; ++p) {
    const int* pass = s.interlaced ? kAdam7[p] : kWhole[0];
    if (pass[0] >= s.width) continue;  // an empty pass has no rows at all
    for (int y = pass[1]; y < s.height; y += pass[3]) append_png_row(raw, s, y, pass[0], pass[2]);
  }
  return raw;
}

Bytes png_ihdr(std::uint32_t width, std::uint32_t height, int bit_depth, int color_type, bool interlaced) {
  Bytes ihdr;
  append_u32be(ihdr, width);
  append_u32be(ihdr, height);
  ihdr.insert(ihdr.end(), {static_cast<std::uint8_t>(bit_depth), static_cast<std::uint8_t>(color_type), 0, 0,
                           static_cast<std::uint8_t>(interlaced)});
  return ihdr;
}

void put_u16be(Bytes& bytes, std::size_t at, std::uint32_t value) {
  bytes.at(at) = static_cast<std::uint8_t>(value >> 8);
  bytes.at(at + 1) = static_cast<std::uint8_t>(value);
}

// A little-endian baseline TIFF directory entry: tag, type (3 SHORT, 4 LONG), count, value.
void put_tiff_entry(Bytes& tiff, std::size_t at, int tag, int type, std::uint32_t count, std::uint32_t value) {
  put_u16le(tiff, at, static_cast<std::uint32_t>(tag));
  put_u16le(tiff, at + 2, static_cast<std::uint32_t>(type));
  put_u32le(tiff, at + 4, count);
  if (type == 3 && count == 1)
    put_u16le(tiff, at + 8, value);
  else
    put_u32le(tiff, at + 8, value);
}

Bytes tiff_layout(std::uint32_t width, std::uint32_t height, const Bytes& pixels) {
  constexpr std::size_t kEntries = 10, kIfd = 8, kBits = kIfd + 2 + kEntries * 12 + 4, kData = kBits + 6;
  Bytes tiff(kData, 0);
  tiff[0] = 'I', tiff[1] = 'I', tiff[2] = 42;
  put_u32le(tiff, 4, kIfd);
  put_u16le(tiff, kIfd, kEntries);
  const std::uint32_t entries[kEntries][4] = {
      {256, 4, 1, width}, {257, 4, 1, height}, {258, 3, 3, kBits},
      {259, 3, 1, 1},     {262, 3, 1, 2},      {273, 4, 1, kData},
      {277, 3, 1, 3},     {278, 4, 1, height}, {279, 4, 1, static_cast<std::uint32_t>(pixels.size())},
      {284, 3, 1, 1}};
  for (std::size_t i = 0; i < kEntries; ++i)
    put_tiff_entry(tiff, kIfd + 2 + 12 * i, static_cast<int>(entries[i][0]), static_cast<int>(entries[i][1]),
                   entries[i][2], entries[i][3]);
  for (std::size_t c = 0; c < 3; ++c) put_u16le(tiff, kBits + 2 * c, 8);
  tiff.insert(tiff.end(), pixels.begin(), pixels.end());
  return tiff;
}

// File header, 40-byte info header, palette; the caller appends the rows.
Bytes bmp_headers(int width, int height, int bits, const std::vector<cv::Vec3b>& palette, std::size_t pixel_bytes) {
  const std::size_t offset = 14 + 40 + 4 * palette.size();
  Bytes bmp(offset, 0);
  bmp[0] = 'B', bmp[1] = 'M';
  put_u32le(bmp, 2, static_cast<std::uint32_t>(offset + pixel_bytes));
  put_u32le(bmp, 10, static_cast<std::uint32_t>(offset));
  put_u32le(bmp, 14, 40);
  put_u32le(bmp, 18, static_cast<std::uint32_t>(width));
  put_u32le(bmp, 22, static_cast<std::uint32_t>(height));
  put_u16le(bmp, 26, 1);
  put_u16le(bmp, 28, static_cast<std::uint32_t>(bits));
  put_u32le(bmp, 34, static_cast<std::uint32_t>(pixel_bytes));
  put_u32le(bmp, 46, static_cast<std::uint32_t>(palette.size()));
  for (std::size_t i = 0; i < palette.size(); ++i) {
    bmp[54 + 4 * i] = palette[i][2];  // stored blue, green, red, 0
    bmp[55 + 4 * i] = palette[i][1];
    bmp[56 + 4 * i] = palette[i][0];
  }
  return bmp;
}

// Rows bottom-up unless `top_down`, each padded to 4 bytes; `pixel` writes one pixel's bytes.
template <typename WritePixel>
Bytes bmp_rows(int width, int height, int bytes_per_pixel, bool top_down, WritePixel pixel) {
  const std::size_t stride = (static_cast<std::size_t>(width) * bytes_per_pixel + 3) / 4 * 4;
  Bytes rows(stride * static_cast<std::size_t>(height), 0);
  for (int y = 0; y < height; ++y) {
    const int stored = top_down ? y : height - 1 - y;
    for (int x = 0; x < width; ++x) pixel(&rows[stored * stride + static_cast<std::size_t>(x) * bytes_per_pixel], y, x);
  }
  return rows;
}

}  // namespace

cv::Mat test_picture(int width, int height, int seed) {
  cv::Mat rgb(height, width, CV_8UC3);
  cv::RNG rng(static_cast<std::uint64_t>(seed) * 7919 + 1);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      rgb.at<cv::Vec3b>(y, x) =
          cv::Vec3b(static_cast<std::uint8_t>((x * 255 / width + seed * 37) & 0xFF),
                    static_cast<std::uint8_t>(y * 255 / height), static_cast<std::uint8_t>((seed * 91) & 0xFF));
  cv::circle(rgb, {width / 2, height / 2}, std::min(width, height) / 3, cv::Scalar(200, 40 + seed % 100, 20), -1);
  cv::Mat noise(height, width, CV_8UC3);
  rng.fill(noise, cv::RNG::UNIFORM, 0, 12);
  rgb += noise;
  return rgb;
}

Bytes png_bytes(const cv::Mat& rgb) { return encode_png(rgb); }

Bytes webp_bytes(const cv::Mat& rgb, bool lossless) {
  std::uint8_t* out = nullptr;
  const int stride = static_cast<int>(rgb.step[0]);
  const std::size_t size = lossless ? WebPEncodeLosslessRGB(rgb.data, rgb.cols, rgb.rows, stride, &out)
                                    : WebPEncodeRGB(rgb.data, rgb.cols, rgb.rows, stride, 80, &out);
  if (size == 0) throw std::logic_error("cannot encode the test WebP");
  Bytes bytes(out, out + size);
  WebPFree(out);
  return bytes;
}

Bytes png_from_spec(const PngSpec& spec) {
  Bytes png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  append_png_chunk(png, "IHDR",
                   png_ihdr(static_cast<std::uint32_t>(spec.width), static_cast<std::uint32_t>(spec.height),
                            spec.bit_depth, spec.color_type, spec.interlaced));
  if (!spec.palette.empty()) append_png_chunk(png, "PLTE", spec.palette);
  if (!spec.trns.empty()) append_png_chunk(png, "tRNS", spec.trns);
  const Bytes raw = png_scanlines(spec);
  Bytes idat(compressBound(static_cast<uLong>(raw.size())));
  uLongf idat_size = static_cast<uLongf>(idat.size());
  if (compress2(idat.data(), &idat_size, raw.data(), static_cast<uLong>(raw.size()), 6) != Z_OK)
    throw std::logic_error("cannot deflate the test PNG");
  idat.resize(idat_size);
  append_png_chunk(png, "IDAT", idat);
  append_png_chunk(png, "IEND", {});
  return png;
}

Bytes tiff_bytes(const cv::Mat& rgb) {
  Bytes pixels;
  for (int y = 0; y < rgb.rows; ++y)
    pixels.insert(pixels.end(), rgb.ptr<std::uint8_t>(y), rgb.ptr<std::uint8_t>(y) + rgb.cols * 3);
  return tiff_layout(static_cast<std::uint32_t>(rgb.cols), static_cast<std::uint32_t>(rgb.rows), pixels);
}

Bytes bmp_bytes(const cv::Mat& rgb, int bits, bool top_down) {
  const int bytes_per_pixel = bits / 8;
  Bytes rows = bmp_rows(rgb.cols, rgb.rows, bytes_per_pixel, top_down, [&](std::uint8_t* out, int y, int x) {
    const cv::Vec3b px = rgb.at<cv::Vec3b>(y, x);
    out[0] = px[2], out[1] = px[1], out[2] = px[0];
    if (bytes_per_pixel == 4) out[3] = 0x80;  // unused by readers; not 0, to catch a reader that uses it
  });
  Bytes bmp = bmp_headers(rgb.cols, top_down ? -rgb.rows : rgb.rows, bits, {}, rows.size());
  bmp.insert(bmp.end(), rows.begin(), rows.end());
  return bmp;
}

Bytes bmp8_bytes(const cv::Mat& indices, const std::vector<cv::Vec3b>& palette, bool top_down) {
  Bytes rows = bmp_rows(indices.cols, indices.rows, 1, top_down,
                        [&](std::uint8_t* out, int y, int x) { *out = indices.at<std::uint8_t>(y, x); });
  Bytes bmp = bmp_headers(indices.cols, top_down ? -indices.rows : indices.rows, 8, palette, rows.size());
  bmp.insert(bmp.end(), rows.begin(), rows.end());
  return bmp;
}

namespace {

// TurboJPEG's encoding of `pixels` (width x height, tightly packed in `format`).
Bytes turbojpeg_bytes(const std::uint8_t* pixels, int width, int height, TJPF format, TJSAMP subsampling, int quality) {
  tjhandle h = tjInitCompress();
  unsigned char* out = nullptr;
  unsigned long size = 0;
  const int failed = tjCompress2(h, pixels, width, 0, height, format, &out, &size, subsampling, quality, 0);
  Bytes jpeg = failed ? Bytes() : Bytes(out, out + size);
  tjFree(out);
  tjDestroy(h);
  if (failed) throw std::runtime_error("TurboJPEG refused to compress");
  return jpeg;
}

}  // namespace

Bytes gray_jpeg(const cv::Mat& rgb, int quality) {
  return turbojpeg_bytes(rgb.data, rgb.cols, rgb.rows, TJPF_RGB, TJSAMP_GRAY, quality);
}

// 32x32 CMYK in four flat quadrants, as Adobe stores it (255 = no ink), written by TurboJPEG as
// YCCK; `plain_cmyk` flips the Adobe marker's transform to 0 so the file reads as plain CMYK.
Bytes cmyk_jpeg(bool plain_cmyk) {
  const std::uint8_t quadrants[4][4] = {
      {255, 255, 255, 255}, {40, 200, 230, 255}, {220, 90, 30, 200}, {128, 128, 128, 60}};
  Bytes pixels(32 * 32 * 4);
  for (int y = 0; y < 32; ++y)
    for (int x = 0; x < 32; ++x)
      for (int c = 0; c < 4; ++c) pixels[(y * 32 + x) * 4 + c] = quadrants[(y >= 16) * 2 + (x >= 16)][c];
  Bytes jpeg = turbojpeg_bytes(pixels.data(), 32, 32, TJPF_CMYK, TJSAMP_444, 95);
  // APP14 "Adobe": marker (2), length (2), "Adobe" (5), version (2), flags (4), transform (1).
  if (jpeg[2] != 0xFF || jpeg[3] != 0xEE) throw std::runtime_error("cmyk_jpeg: no Adobe marker where expected");
  if (plain_cmyk) jpeg[2 + 15] = 0;
  return jpeg;
}

Bytes jpeg_declaring(std::uint32_t width, std::uint32_t height) {
  Bytes jpeg = encode_jpeg(test_picture(16, 16, 3), 90);
  const std::size_t sof = find_marker(jpeg, 0xC0);  // marker, length, precision, height, width
  put_u16be(jpeg, sof + 5, height);
  put_u16be(jpeg, sof + 7, width);
  return jpeg;
}

Bytes blank_png(std::uint32_t width, std::uint32_t height) {
  Bytes png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  append_png_chunk(png, "IHDR", png_ihdr(width, height, 1, 0, false));
  // Row by row (filter byte 0, then width bits of zeros), so no whole image is ever held here.
  const Bytes row(1 + (std::size_t{width} + 7) / 8, 0);
  z_stream z{};
  deflateInit(&z, 9);
  Bytes idat, out(1 << 16);
  for (std::uint32_t y = 0; y <= height; ++y) {
    z.next_in = const_cast<Bytef*>(row.data());
    z.avail_in = y < height ? static_cast<uInt>(row.size()) : 0;
    const int flush = y < height ? Z_NO_FLUSH : Z_FINISH;
    do {
      z.next_out = out.data();
      z.avail_out = static_cast<uInt>(out.size());
      deflate(&z, flush);
      idat.insert(idat.end(), out.data(), out.data() + (out.size() - z.avail_out));
    } while (z.avail_out == 0);
  }
  deflateEnd(&z);
  append_png_chunk(png, "IDAT", idat);
  append_png_chunk(png, "IEND", {});
  return png;
}

Bytes png_declaring(std::uint32_t width, std::uint32_t height) {
  // A real 8x8 image under an IHDR that declares the size (with a matching CRC).
  Bytes png = png_bytes(test_picture(8, 8, 4));
  Bytes patched(png.begin(), png.begin() + 8);
  append_png_chunk(patched, "IHDR", png_ihdr(width, height, 8, 2, false));
  patched.insert(patched.end(), png.begin() + 8 + 25, png.end());
  return patched;
}

Bytes webp_declaring(std::uint32_t width, std::uint32_t height) {
  // RIFF header, then only a VP8X chunk: flags, reserved, canvas width - 1, height - 1 (24 bits).
  Bytes webp = {'R', 'I', 'F', 'F', 0, 0, 0, 0, 'W', 'E', 'B', 'P', 'V', 'P', '8', 'X', 10, 0, 0, 0};
  webp.resize(30, 0);
  for (int i = 0; i < 3; ++i) {
    webp[24 + i] = static_cast<std::uint8_t>((width - 1) >> (8 * i));
    webp[27 + i] = static_cast<std::uint8_t>((height - 1) >> (8 * i));
  }
  put_u32le(webp, 4, static_cast<std::uint32_t>(webp.size() - 8));
  return webp;
}

Bytes tiff_declaring(std::uint32_t width, std::uint32_t height) {
  return tiff_layout(width, height, Bytes(64 * 3, 0x7F));
}

Bytes bmp_declaring(std::uint32_t width, std::uint32_t height) {
  Bytes bmp = bmp_bytes(test_picture(4, 4, 5), 24, false);
  put_u32le(bmp, 18, width);
  put_u32le(bmp, 22, height);
  return bmp;
}

void put_u16le(Bytes& bytes, std::size_t at, std::uint32_t value) {
  bytes.at(at) = static_cast<std::uint8_t>(value);
  bytes.at(at + 1) = static_cast<std::uint8_t>(value >> 8);
}

void put_u32le(Bytes& bytes, std::size_t at, std::uint32_t value) {
  for (int i = 0; i < 4; ++i) bytes.at(at + static_cast<std::size_t>(i)) = static_cast<std::uint8_t>(value >> (8 * i));
}

Bytes truncated(const Bytes& bytes, double fraction) {
  return Bytes(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(bytes.size() * fraction));
}

Bytes jpeg_cut_inside_huffman_table(const Bytes& jpeg) {
  return Bytes(jpeg.begin(), jpeg.begin() + static_cast<std::ptrdiff_t>(find_marker(jpeg, 0xC4) + 12));
}

Bytes jpeg_cut_before_scan(const Bytes& jpeg) {
  return Bytes(jpeg.begin(), jpeg.begin() + static_cast<std::ptrdiff_t>(find_marker(jpeg, 0xDA)));
}

Bytes jpeg_with_garbage_header(const Bytes& jpeg) {
  Bytes bytes = jpeg;
  for (std::size_t i = 3; i < std::min<std::size_t>(64, bytes.size()); ++i)
    bytes[i] = static_cast<std::uint8_t>((i * 37) & 0xFF);
  return bytes;
}

Bytes jpeg_with_bogus_huffman_table(const Bytes& jpeg) {
  Bytes bytes = jpeg;
  // Marker (2), length (2), table class/id (1), then 16 code counts: all 255 is 4080 codes.
  const std::size_t dht = find_marker(bytes, 0xC4);
  std::fill(bytes.begin() + static_cast<std::ptrdiff_t>(dht + 5), bytes.begin() + static_cast<std::ptrdiff_t>(dht + 21),
            0xFF);
  return bytes;
}

Bytes with_garbage_header(const Bytes& bytes, std::size_t keep) {
  Bytes damaged = bytes;
  for (std::size_t i = keep; i < std::min<std::size_t>(64, damaged.size()); ++i)
    damaged[i] = static_cast<std::uint8_t>((i * 37 + 11) & 0xFF);
  return damaged;
}

Bytes with_bit_flips(const Bytes& bytes, int flips, int seed, std::size_t keep) {
  Bytes damaged = bytes;
  if (damaged.size() <= keep) return damaged;
  cv::RNG rng(static_cast<std::uint64_t>(seed) * 104729 + 7);
  for (int i = 0; i < flips; ++i) {
    const std::size_t at = keep + static_cast<std::size_t>(rng.uniform(0, static_cast<int>(damaged.size() - keep)));
    damaged[at] ^= static_cast<std::uint8_t>(1u << rng.uniform(0, 8));
  }
  return damaged;
}

Bytes text_bytes() {
  const std::string text = "<!DOCTYPE html>\n<html><body><h1>404 Not Found</h1></body></html>\n";
  return Bytes(text.begin(), text.end());
}

}  // namespace shoplens::testing
