// Image decoding: a damaged file must not change how the next file decodes on the same thread.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <thread>

#include "image_test_util.h"
#include "shoplens/core/errors.h"
#include "shoplens/data/image_io.h"

namespace shoplens {
namespace {

using testing::Bytes;

Bytes valid_jpeg() { return encode_jpeg(testing::test_picture(96, 64, 1), 90); }

// Runs `body` on a new thread: its decoders have seen nothing before, whatever ran earlier in
// this test process.
void on_fresh_thread(const std::function<void()>& body) { std::thread(body).join(); }

cv::Mat decode_whole(const Bytes& bytes) { return decode_image(bytes.data(), bytes.size()).rgb; }

cv::Mat decode_scaled(const Bytes& bytes) {
  DecodeOptions options;
  options.min_short_side = 32;  // the path prepare takes: a 1/2-scale DCT decode
  return decode_image(bytes.data(), bytes.size(), options).rgb;
}

cv::Mat decode_payload(const Bytes& bytes) {
  cv::Mat rgb;
  decode_jpeg_into(bytes.data(), bytes.size(), rgb);
  return rgb;
}

bool same_pixels(const cv::Mat& a, const cv::Mat& b) {
  return a.size() == b.size() && a.type() == b.type() && cv::norm(a, b, cv::NORM_INF) == 0;
}

struct BadInput {
  std::string name;
  std::function<Bytes()> make;
};
void PrintTo(const BadInput& input, std::ostream* os) { *os << input.name; }

std::vector<BadInput> bad_inputs() {
  return {
      {"truncated_jpeg", [] { return testing::truncated(valid_jpeg(), 1.0 / 3); }},
      {"jpeg_cut_inside_huffman_table", [] { return testing::jpeg_cut_inside_huffman_table(valid_jpeg()); }},
      {"jpeg_cut_before_scan", [] { return testing::jpeg_cut_before_scan(valid_jpeg()); }},
      {"jpeg_with_garbage_header", [] { return testing::jpeg_with_garbage_header(valid_jpeg()); }},
      {"jpeg_with_bogus_huffman_table", [] { return testing::jpeg_with_bogus_huffman_table(valid_jpeg()); }},
      {"jpeg_signature_only",
       [] {
         return Bytes{0xFF, 0xD8, 0xFF};
       }},
      {"empty_file", [] { return Bytes{}; }},
      {"text_file", [] { return testing::text_bytes(); }},
      {"truncated_png",
       [] { return testing::truncated(testing::png_bytes(testing::test_picture(96, 64, 2)), 1.0 / 3); }},
  };
}

class DecodeAfterBadInput : public ::testing::TestWithParam<BadInput> {};

using Decode = cv::Mat (*)(const Bytes&);

// Decodes `bad` and then `good` on one thread; `good` must come out as on a thread of its own.
void expect_bad_input_leaves_no_trace(const Bytes& bad, const Bytes& good, Decode decode, const std::string& name) {
  cv::Mat expected, after;
  on_fresh_thread([&] { expected = decode(good); });
  on_fresh_thread([&] {
    EXPECT_THROW(decode(bad), DataError) << name;
    try {
      after = decode(good);
    } catch (const DataError& e) {
      ADD_FAILURE() << "a valid JPEG failed after " << name << ": " << e.what();
    }
  });
  EXPECT_TRUE(same_pixels(after, expected)) << "a valid JPEG decoded differently after " << name;
}

// decode_image (serve, score, prepare), full size and DCT-scaled.
TEST_P(DecodeAfterBadInput, NextJpegDecodesAsOnAFreshThread) {
  const Bytes bad = GetParam().make();
  expect_bad_input_leaves_no_trace(bad, valid_jpeg(), decode_whole, GetParam().name);
  expect_bad_input_leaves_no_trace(bad, valid_jpeg(), decode_scaled, GetParam().name + " (scaled)");
}

// decode_jpeg_into (the loader and score's shard path).
TEST_P(DecodeAfterBadInput, NextShardPayloadDecodesAsOnAFreshThread) {
  expect_bad_input_leaves_no_trace(GetParam().make(), valid_jpeg(), decode_payload, GetParam().name);
}

INSTANTIATE_TEST_SUITE_P(ImageIo, DecodeAfterBadInput, ::testing::ValuesIn(bad_inputs()),
                         [](const ::testing::TestParamInfo<BadInput>& info) { return info.param.name; });

}  // namespace
}  // namespace shoplens
