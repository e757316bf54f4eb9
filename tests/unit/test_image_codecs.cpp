// The format decoders behind decode_image: every layout each one promises decodes to the right
// RGB pixels, damaged files are DataErrors with a reason (never a half-grey image, never a line on
// stderr), and a header that declares too many pixels is refused before anything is decoded.
#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <chrono>
#include <string>

#include "image_test_util.h"
#include "shoplens/core/errors.h"
#include "shoplens/data/image_io.h"

namespace shoplens {
namespace {

using testing::Bytes;
using testing::cmyk_jpeg;

DecodedImage decode(const Bytes& bytes, const DecodeOptions& options = {}) {
  return decode_image(bytes.data(), bytes.size(), options);
}

// The DataError's reason, or a failure when the bytes decode.
std::string decode_error(const Bytes& bytes, const DecodeOptions& options = {}) {
  try {
    decode(bytes, options);
  } catch (const DataError& e) {
    return e.what();
  }
  ADD_FAILURE() << "decoded without an error";
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

double max_difference(const cv::Mat& a, const cv::Mat& b) {
  if (a.size() != b.size() || a.type() != b.type()) return 1e9;
  return cv::norm(a, b, cv::NORM_INF);
}

// ---- JPEG ----

// What OpenCV 4.6's imdecode gave for these files (quadrant centres, RGB), before the project
// stopped using it.
void expect_quadrants(const cv::Mat& rgb, const int expected[4][3]) {
  for (int q = 0; q < 4; ++q) {
    const cv::Vec3b px =
        rgb.at<cv::Vec3b>((q / 2) * rgb.rows / 2 + rgb.rows / 4, (q % 2) * rgb.cols / 2 + rgb.cols / 4);
    for (int c = 0; c < 3; ++c) EXPECT_NEAR(px[c], expected[q][c], 3) << "quadrant " << q << " channel " << c;
  }
}

TEST(ImageCodecsJpeg, YcckJpegDecodesAsOpenCvDid) {
  const int opencv[4][3] = {{255, 255, 255}, {42, 201, 231}, {173, 72, 25}, {31, 31, 31}};
  const DecodedImage full = decode(cmyk_jpeg(false));
  EXPECT_EQ(full.rgb.size(), cv::Size(32, 32));
  expect_quadrants(full.rgb, opencv);
  DecodeOptions half;
  half.min_short_side = 16;
  const DecodedImage scaled = decode(cmyk_jpeg(false), half);
  EXPECT_EQ(scaled.scale_denominator, 2);
  expect_quadrants(scaled.rgb, opencv);
}

TEST(ImageCodecsJpeg, CmykJpegDecodesAsOpenCvDid) {
  const int opencv[4][3] = {{1, 129, 129}, {100, 87, 211}, {105, 142, 47}, {30, 31, 31}};
  expect_quadrants(decode(cmyk_jpeg(true)).rgb, opencv);
}

TEST(ImageCodecsJpeg, GrayscaleJpegDecodesToEqualChannels) {
  const cv::Mat picture = testing::test_picture(40, 24, 1);
  const Bytes jpeg = testing::gray_jpeg(picture, 90);
  const cv::Mat rgb = decode(jpeg).rgb;
  ASSERT_EQ(rgb.size(), cv::Size(40, 24));
  const cv::Vec3b px = rgb.at<cv::Vec3b>(10, 10);
  EXPECT_TRUE(px[0] == px[1] && px[1] == px[2]);
}

// prepare stores a JPEG's own bytes when this flag is set: the shard reader's decode_jpeg_into
// must then give exactly the pixels the full decoder validated. CMYK and DCT-scaled decodes differ.
TEST(ImageCodecsJpeg, UsableAsPayloadPromisesTheShardDecoderGivesTheSamePixels) {
  const cv::Mat picture = testing::test_picture(40, 24, 5);
  const Bytes colour = encode_jpeg(picture, 90);
  const Bytes gray = testing::gray_jpeg(picture, 90);
  for (const Bytes* jpeg : {&colour, &gray}) {
    const DecodedImage full = decode(*jpeg);
    ASSERT_TRUE(full.usable_as_payload);
    cv::Mat again;
    decode_jpeg_into(jpeg->data(), jpeg->size(), again);
    EXPECT_EQ(max_difference(again, full.rgb), 0.0);
  }
  EXPECT_FALSE(decode(cmyk_jpeg(false)).usable_as_payload);
  EXPECT_FALSE(decode(cmyk_jpeg(true)).usable_as_payload);
  DecodeOptions half;
  half.min_short_side = 12;
  const DecodedImage scaled = decode(colour, half);
  ASSERT_EQ(scaled.scale_denominator, 2);
  EXPECT_FALSE(scaled.usable_as_payload);
  EXPECT_FALSE(decode(testing::png_bytes(picture)).usable_as_payload);
}

TEST(ImageCodecsJpeg, EncoderTakesEitherChannelOrder) {
  const cv::Mat rgb(16, 16, CV_8UC3, cv::Scalar(240, 120, 10));
  JpegEncodeOptions as_bgr;
  as_bgr.order = ChannelOrder::kBgr;
  EXPECT_NEAR(decode(encode_jpeg(rgb, 95)).rgb.at<cv::Vec3b>(8, 8)[0], 240, 3);
  EXPECT_NEAR(decode(encode_jpeg(rgb, as_bgr)).rgb.at<cv::Vec3b>(8, 8)[0], 10, 3);
}

// ---- PNG ----

TEST(ImageCodecsPng, Rgb8RoundTripsExactlyInEitherChannelOrder) {
  const cv::Mat picture = testing::test_picture(37, 21, 2);
  EXPECT_EQ(max_difference(decode(encode_png(picture)).rgb, picture), 0);
  PngEncodeOptions fast_bgr;
  fast_bgr.compression_level = 1;
  fast_bgr.huffman_only = true;
  fast_bgr.order = ChannelOrder::kBgr;
  cv::Mat bgr;
  cv::cvtColor(picture, bgr, cv::COLOR_RGB2BGR);
  EXPECT_EQ(max_difference(decode(encode_png(bgr, fast_bgr)).rgb, picture), 0);
}

struct PngCase {
  std::string name;
  int bit_depth, color_type;
  bool interlaced;
};
void PrintTo(const PngCase& c, std::ostream* os) { *os << c.name; }

// A 13x11 image of the case's layout (odd sizes: partial bytes and every Adam7 pass), and the
// RGB a reader must produce from it: low bit depths scaled up, 16 bits rounded down to 8,
// palette looked up, alpha dropped.
struct PngSample {
  Bytes png;
  cv::Mat expected;
};

PngSample png_sample(const PngCase& c) {
  testing::PngSpec spec;
  spec.width = 13;
  spec.height = 11;
  spec.bit_depth = c.bit_depth;
  spec.color_type = c.color_type;
  spec.interlaced = c.interlaced;
  const bool palette = c.color_type == 3, colour = c.color_type & 2, alpha = c.color_type & 4;
  const int channels = palette ? 1 : (colour ? 3 : 1) + (alpha ? 1 : 0);
  const int max = (1 << c.bit_depth) - 1;
  const int entries = palette ? std::min(max + 1, 40) : 0;
  for (int i = 0; i < entries; ++i)
    spec.palette.insert(spec.palette.end(), {std::uint8_t(i * 6), std::uint8_t(255 - i * 5), std::uint8_t(i * 3 + 7)});
  if (palette) spec.trns = {0, 128};  // entries 0 and 1 transparent-ish: dropped like any alpha
  cv::Mat expected(11, 13, CV_8UC3);
  for (int y = 0; y < 11; ++y)
    for (int x = 0; x < 13; ++x) {
      std::array<int, 4> v{};
      for (int ch = 0; ch < channels; ++ch) {
        v[ch] = palette ? (x + 3 * y) % entries : ((x * 37 + y * 101 + ch * 59) * 2654435761u >> 7) % (max + 1);
        spec.samples.push_back(static_cast<std::uint16_t>(v[ch]));
      }
      const auto to8 = [&](int s) { return c.bit_depth == 16 ? (s * 255 + 32895) >> 16 : s * 255 / max; };
      if (palette)
        expected.at<cv::Vec3b>(y, x) =
            cv::Vec3b(spec.palette[3 * v[0]], spec.palette[3 * v[0] + 1], spec.palette[3 * v[0] + 2]);
      else if (colour)
        expected.at<cv::Vec3b>(y, x) = cv::Vec3b(to8(v[0]), to8(v[1]), to8(v[2]));
      else
        expected.at<cv::Vec3b>(y, x) = cv::Vec3b(to8(v[0]), to8(v[0]), to8(v[0]));
    }
  return {testing::png_from_spec(spec), expected};
}

class PngLayouts : public ::testing::TestWithParam<PngCase> {};

TEST_P(PngLayouts, DecodeToRgb8) {
  const PngSample sample = png_sample(GetParam());
  const DecodedImage d = decode(sample.png);
  EXPECT_EQ(d.format, ImageFormat::kPng);
  EXPECT_EQ(d.original_width, 13);
  EXPECT_LE(max_difference(d.rgb, sample.expected), 1);  // 16 -> 8 bit rounding
}

INSTANTIATE_TEST_SUITE_P(
    ImageCodecsPng, PngLayouts,
    ::testing::Values(PngCase{"gray_1bit", 1, 0, false}, PngCase{"gray_2bit", 2, 0, false},
                      PngCase{"gray_4bit", 4, 0, false}, PngCase{"gray_8bit", 8, 0, false},
                      PngCase{"gray_16bit", 16, 0, false}, PngCase{"rgb_16bit", 16, 2, false},
                      PngCase{"palette_8bit_with_trns", 8, 3, false}, PngCase{"palette_4bit", 4, 3, false},
                      PngCase{"gray_alpha_8bit", 8, 4, false}, PngCase{"rgba_8bit", 8, 6, false},
                      PngCase{"rgba_16bit", 16, 6, false}, PngCase{"interlaced_rgb_8bit", 8, 2, true},
                      PngCase{"interlaced_gray_1bit", 1, 0, true}, PngCase{"interlaced_palette_2bit", 2, 3, true}),
    [](const ::testing::TestParamInfo<PngCase>& info) { return info.param.name; });

// Each cut is inside a different part: the IHDR, the IDAT, and between the IDAT and the IEND
// (all the pixels are there, the file still is not whole).
TEST(ImageCodecsPng, TruncatedPngIsCorruptWhereverItIsCut) {
  const Bytes png = encode_png(testing::test_picture(40, 30, 3));
  for (std::size_t cut : {std::size_t{20}, png.size() / 2, png.size() - 12}) {
    ::testing::internal::CaptureStderr();
    const std::string reason = decode_error(Bytes(png.begin(), png.begin() + static_cast<std::ptrdiff_t>(cut)));
    EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
    EXPECT_TRUE(contains(reason, "PNG") && contains(reason, "truncated")) << cut << ": " << reason;
  }
}

TEST(ImageCodecsPng, DamagedImageDataIsCorrupt) {
  Bytes png = encode_png(testing::test_picture(40, 30, 3));
  png[png.size() / 2] ^= 0x55;  // inside the IDAT: its CRC no longer matches
  EXPECT_TRUE(contains(decode_error(png), "corrupt PNG")) << decode_error(png);
}

TEST(ImageCodecsPng, HeaderDeclaringMoreRowsThanTheDataHoldsIsCorrupt) {
  const std::string reason = decode_error(testing::png_declaring(8, 16));
  EXPECT_TRUE(contains(reason, "corrupt PNG")) << reason;
}

// ---- WebP ----

TEST(ImageCodecsWebp, LosslessRoundTripsExactlyAndLossyStaysClose) {
  const cv::Mat picture = testing::test_picture(45, 31, 4);
  const DecodedImage lossless = decode(testing::webp_bytes(picture, true));
  EXPECT_EQ(lossless.format, ImageFormat::kWebp);
  EXPECT_EQ(max_difference(lossless.rgb, picture), 0);
  const cv::Mat lossy = decode(testing::webp_bytes(picture)).rgb;
  ASSERT_EQ(lossy.size(), picture.size());
  EXPECT_LT(cv::norm(lossy, picture, cv::NORM_L1) / picture.total() / 3, 8.0);
}

TEST(ImageCodecsWebp, TruncatedWebpIsCorrupt) {
  const Bytes webp = testing::webp_bytes(testing::test_picture(64, 48, 5));
  for (double fraction : {0.1, 0.5, 0.95}) {
    const std::string reason = decode_error(testing::truncated(webp, fraction));
    EXPECT_TRUE(contains(reason, "WebP")) << fraction << ": " << reason;
  }
}

TEST(ImageCodecsWebp, AnimatedWebpIsRefused) {
  Bytes webp = testing::webp_declaring(64, 64);
  webp[20] = 0x02;  // VP8X flags: animation
  EXPECT_TRUE(contains(decode_error(webp), "animated WebP")) << decode_error(webp);
}

// ---- TIFF ----

TEST(ImageCodecsTiff, UncompressedRgbDecodesExactly) {
  const cv::Mat picture = testing::test_picture(29, 17, 6);
  const DecodedImage d = decode(testing::tiff_bytes(picture));
  EXPECT_EQ(d.format, ImageFormat::kTiff);
  EXPECT_EQ(max_difference(d.rgb, picture), 0);
}

TEST(ImageCodecsTiff, TruncatedOrLyingTiffIsCorruptAndSilent) {
  const Bytes tiff = testing::tiff_bytes(testing::test_picture(29, 17, 6));
  Bytes past_the_end = tiff;
  testing::put_u32le(past_the_end, 8 + 2 + 5 * 12 + 8, 1u << 30);  // StripOffsets far past the file
  for (const Bytes& bad : {testing::truncated(tiff, 0.7), testing::truncated(tiff, 0.05), past_the_end}) {
    ::testing::internal::CaptureStderr();
    const std::string reason = decode_error(bad);
    EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
    EXPECT_TRUE(contains(reason, "TIFF")) << reason;
  }
}

// ---- BMP ----

struct BmpCase {
  std::string name;
  int bits;
  bool top_down;
};
void PrintTo(const BmpCase& c, std::ostream* os) { *os << c.name; }

class BmpLayouts : public ::testing::TestWithParam<BmpCase> {};

// 13 pixels wide: rows need padding at every bit depth.
TEST_P(BmpLayouts, DecodeExactly) {
  const cv::Mat picture = testing::test_picture(13, 9, 7);
  const DecodedImage d = decode(testing::bmp_bytes(picture, GetParam().bits, GetParam().top_down));
  EXPECT_EQ(d.format, ImageFormat::kBmp);
  EXPECT_EQ(max_difference(d.rgb, picture), 0);
}

INSTANTIATE_TEST_SUITE_P(ImageCodecsBmp, BmpLayouts,
                         ::testing::Values(BmpCase{"bgr24_bottom_up", 24, false}, BmpCase{"bgr24_top_down", 24, true},
                                           BmpCase{"bgrx32_bottom_up", 32, false},
                                           BmpCase{"bgrx32_top_down", 32, true}),
                         [](const ::testing::TestParamInfo<BmpCase>& info) { return info.param.name; });

std::vector<cv::Vec3b> test_palette(int n) {
  std::vector<cv::Vec3b> palette;
  for (int i = 0; i < n; ++i) palette.emplace_back(i * 9 % 256, 255 - i * 4, i * 31 % 256);
  return palette;
}

TEST(ImageCodecsBmp, PaletteBmpDecodesBothWaysUp) {
  const std::vector<cv::Vec3b> palette = test_palette(60);
  cv::Mat indices(7, 11, CV_8UC1), expected(7, 11, CV_8UC3);
  for (int y = 0; y < 7; ++y)
    for (int x = 0; x < 11; ++x) {
      indices.at<std::uint8_t>(y, x) = static_cast<std::uint8_t>((x * 7 + y * 3) % 60);
      expected.at<cv::Vec3b>(y, x) = palette[(x * 7 + y * 3) % 60];
    }
  for (bool top_down : {false, true})
    EXPECT_EQ(max_difference(decode(testing::bmp8_bytes(indices, palette, top_down)).rgb, expected), 0) << top_down;
}

// BI_BITFIELDS with the masks after a 40-byte header, as many writers store 32-bit BMPs.
Bytes with_bitfields(const Bytes& bmp32, std::uint32_t red_mask) {
  Bytes bmp(bmp32.begin(), bmp32.begin() + 54);
  for (std::uint32_t mask : {red_mask, 0x0000FF00u, 0x000000FFu})
    for (int i = 0; i < 4; ++i) bmp.push_back(static_cast<std::uint8_t>(mask >> (8 * i)));
  bmp.insert(bmp.end(), bmp32.begin() + 54, bmp32.end());
  testing::put_u32le(bmp, 10, 66);
  testing::put_u32le(bmp, 30, 3);
  return bmp;
}

TEST(ImageCodecsBmp, BitfieldsWithStandardMasksDecodeAndOthersAreUnsupported) {
  const cv::Mat picture = testing::test_picture(13, 9, 8);
  const Bytes bmp32 = testing::bmp_bytes(picture, 32, false);
  EXPECT_EQ(max_difference(decode(with_bitfields(bmp32, 0x00FF0000)).rgb, picture), 0);
  const std::string reason = decode_error(with_bitfields(bmp32, 0xFF000000));
  EXPECT_TRUE(contains(reason, "unsupported BMP variant (32-bit, BI_BITFIELDS")) << reason;
}

TEST(ImageCodecsBmp, OtherVariantsAreUnsupportedByName) {
  const Bytes bmp24 = testing::bmp_bytes(testing::test_picture(8, 8, 9), 24, false);
  Bytes rle8 = testing::bmp8_bytes(cv::Mat(8, 8, CV_8UC1, cv::Scalar(1)), test_palette(4), false);
  testing::put_u32le(rle8, 30, 1);
  Bytes bits16 = bmp24;
  testing::put_u16le(bits16, 28, 16);
  Bytes os2 = bmp24;
  testing::put_u32le(os2, 14, 12);
  EXPECT_EQ(decode_error(rle8), "unsupported BMP variant (8-bit, BI_RLE8)");
  EXPECT_EQ(decode_error(bits16), "unsupported BMP variant (16-bit, BI_RGB)");
  EXPECT_EQ(decode_error(os2), "unsupported BMP variant (OS/2 1.x header)");
}

// Every field the reader trusts comes from the file; each lie must end as a DataError.
TEST(ImageCodecsBmp, DamagedOrLyingHeadersAreCorrupt) {
  const cv::Mat picture = testing::test_picture(13, 9, 10);
  const Bytes bmp = testing::bmp_bytes(picture, 24, false);
  Bytes offset_past_end = bmp, offset_in_header = bmp, negative_width = bmp, lowest_height = bmp, big_palette,
        index_past_palette;
  testing::put_u32le(offset_past_end, 10, 0xFFFFFFF0u);
  testing::put_u32le(offset_in_header, 10, 20);
  testing::put_u32le(negative_width, 18, static_cast<std::uint32_t>(-13));
  testing::put_u32le(lowest_height, 22, 0x80000000u);  // INT32_MIN: top-down 2^31 rows
  index_past_palette = testing::bmp8_bytes(cv::Mat(4, 4, CV_8UC1, cv::Scalar(9)), test_palette(4), false);
  big_palette = testing::bmp8_bytes(cv::Mat(4, 4, CV_8UC1, cv::Scalar(1)), test_palette(4), false);
  testing::put_u32le(big_palette, 46, 100000);
  EXPECT_TRUE(contains(decode_error(testing::truncated(bmp, 0.8)), "corrupt BMP: pixel data needs"));
  EXPECT_TRUE(contains(decode_error(testing::truncated(bmp, 0.1)), "corrupt BMP: the file ends inside its header"));
  EXPECT_TRUE(contains(decode_error(offset_past_end), "corrupt BMP: pixel data needs"));
  EXPECT_TRUE(contains(decode_error(offset_in_header), "corrupt BMP: the pixel data starts inside the header"));
  EXPECT_TRUE(contains(decode_error(negative_width), "corrupt BMP: negative width"));
  EXPECT_TRUE(contains(decode_error(lowest_height), "image too large"));
  EXPECT_TRUE(contains(decode_error(big_palette), "corrupt BMP: 100000 palette entries"));
  EXPECT_TRUE(contains(decode_error(index_past_palette), "corrupt BMP: pixel value 9 outside its 4-colour palette"));
}

TEST(ImageCodecsBmp, MissingPaddingAfterTheLastRowLosesNoPixel) {
  const cv::Mat picture = testing::test_picture(13, 9, 11);
  const Bytes bmp = testing::bmp_bytes(picture, 24, true);
  const Bytes short_by_padding(bmp.begin(), bmp.end() - 1);  // 13 * 3 = 39 bytes + 1 of padding
  EXPECT_EQ(max_difference(decode(short_by_padding).rgb, picture), 0);
}

// ---- declared sizes (decompression bombs) ----

struct DeclaringCase {
  std::string name;
  Bytes (*make)(std::uint32_t, std::uint32_t);
};
void PrintTo(const DeclaringCase& c, std::ostream* os) { *os << c.name; }

class HugeDeclaredSize : public ::testing::TestWithParam<DeclaringCase> {};

// A few hundred bytes that claim 30000x30000 (900 megapixels, 2.7 GB of RGB): refused from the
// header, at once, with the size reason (not a decode or truncation error after allocating).
TEST_P(HugeDeclaredSize, IsRefusedFromTheHeaderBeforeDecoding) {
  const Bytes bomb = GetParam().make(30000, 30000);
  ASSERT_LT(bomb.size(), 4096u);
  const auto start = std::chrono::steady_clock::now();
  const std::string reason = decode_error(bomb);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0);
  EXPECT_TRUE(contains(reason, "image too large: 30000x30000")) << reason;
  EXPECT_TRUE(contains(reason, "exceeds the limit of 100 megapixels")) << reason;
}

TEST_P(HugeDeclaredSize, RespectsAConfiguredLimit) {
  DecodeOptions options;
  options.max_megapixels = 0.01;  // 10,000 pixels
  const std::string reason = decode_error(GetParam().make(200, 100), options);
  EXPECT_TRUE(contains(reason, "image too large: 200x100")) << reason;
}

INSTANTIATE_TEST_SUITE_P(ImageCodecsLimits, HugeDeclaredSize,
                         ::testing::Values(DeclaringCase{"jpeg", testing::jpeg_declaring},
                                           DeclaringCase{"png", testing::png_declaring},
                                           DeclaringCase{"webp", testing::webp_declaring},
                                           DeclaringCase{"tiff", testing::tiff_declaring},
                                           DeclaringCase{"bmp", testing::bmp_declaring}),
                         [](const ::testing::TestParamInfo<DeclaringCase>& info) { return info.param.name; });

TEST(ImageCodecsLimits, HeaderDeclaringNoPixelsIsRefused) {
  EXPECT_EQ(decode_error(testing::bmp_declaring(0, 5)), "BMP has no pixels (0x5)");
  const std::string tiff = decode_error(testing::tiff_declaring(7, 0));
  EXPECT_TRUE(contains(tiff, "TIFF")) << tiff;
}

}  // namespace
}  // namespace shoplens
