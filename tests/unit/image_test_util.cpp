#include "image_test_util.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

namespace shoplens::testing {
namespace {

// Offset of the first FF <marker> pair; throws when the file has none (a broken test input).
std::size_t find_marker(const Bytes& jpeg, std::uint8_t marker) {
  for (std::size_t i = 2; i + 1 < jpeg.size(); ++i)
    if (jpeg[i] == 0xFF && jpeg[i + 1] == marker) return i;
  throw std::logic_error("test JPEG has no marker " + std::to_string(marker));
}

Bytes encode_with_opencv(const cv::Mat& rgb, const char* ext, std::vector<int> params) {
  cv::Mat bgr;
  cv::cvtColor(rgb, bgr, cv::COLOR_RGB2BGR);
  std::vector<std::uint8_t> bytes;
  if (!cv::imencode(ext, bgr, bytes, params)) throw std::logic_error(std::string("cannot encode ") + ext);
  return bytes;
}

}  // namespace

cv::Mat test_picture(int width, int height, int seed) {
  cv::Mat rgb(height, width, CV_8UC3);
  cv::RNG rng(static_cast<std::uint64_t>(seed) * 7919 + 1);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      rgb.at<cv::Vec3b>(y, x) = cv::Vec3b(static_cast<std::uint8_t>((x * 255 / width + seed * 37) & 0xFF),
                                          static_cast<std::uint8_t>(y * 255 / height),
                                          static_cast<std::uint8_t>((seed * 91) & 0xFF));
  cv::circle(rgb, {width / 2, height / 2}, std::min(width, height) / 3, cv::Scalar(200, 40 + seed % 100, 20), -1);
  cv::Mat noise(height, width, CV_8UC3);
  rng.fill(noise, cv::RNG::UNIFORM, 0, 12);
  rgb += noise;
  return rgb;
}

Bytes png_bytes(const cv::Mat& rgb) { return encode_with_opencv(rgb, ".png", {}); }

Bytes webp_bytes(const cv::Mat& rgb) { return encode_with_opencv(rgb, ".webp", {cv::IMWRITE_WEBP_QUALITY, 80}); }

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
  std::fill(bytes.begin() + static_cast<std::ptrdiff_t>(dht + 5), bytes.begin() + static_cast<std::ptrdiff_t>(dht + 21), 0xFF);
  return bytes;
}

Bytes text_bytes() {
  const std::string text = "<!DOCTYPE html>\n<html><body><h1>404 Not Found</h1></body></html>\n";
  return Bytes(text.begin(), text.end());
}

}  // namespace shoplens::testing
