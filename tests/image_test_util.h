// Test images: a deterministic photo-like picture, its encodings, and the damaged files that
// broken uploads and storage produce (each named after what it does to the bytes).
#pragma once

#include <cstdint>
#include <vector>

#include <opencv2/core/mat.hpp>

namespace shoplens::testing {

using Bytes = std::vector<std::uint8_t>;

// Gradients, a disc and mild noise (RGB, CV_8UC3): compresses like a photo, differs per seed.
cv::Mat test_picture(int width, int height, int seed);

Bytes png_bytes(const cv::Mat& rgb);
Bytes webp_bytes(const cv::Mat& rgb);  // lossy, quality 80

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

}  // namespace shoplens::testing
