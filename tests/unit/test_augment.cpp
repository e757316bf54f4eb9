#include <chrono>
#include <cmath>
#include <cstdio>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "data/trivial_augment.h"
#include "shoplens/core/config.h"
#include "shoplens/core/errors.h"
#include "shoplens/data/augment.h"
#include "image_test_util.h"

namespace shoplens {
namespace {

cv::Mat noise_image(int rows, int cols, int seed) {
  cv::Mat img(rows, cols, CV_8UC3);
  cv::RNG rng(seed);
  rng.fill(img, cv::RNG::UNIFORM, 0, 256);
  return img;
}

// Smooth content (noise blurred), closer to a photo than raw noise.
cv::Mat photo_like(int rows, int cols, int seed) {
  cv::Mat img = noise_image(rows, cols, seed);
  cv::GaussianBlur(img, img, cv::Size(0, 0), 3.0);
  return img;
}

// Smallest and largest of the values seen.
struct Range {
  double lo = 1e300, hi = -1e300;
  void add(double v) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
};

std::vector<float> run(const Augmenter& aug, const cv::Mat& img, std::uint64_t seed) {
  std::vector<float> out(aug.floats_per_sample());
  aug.apply(img, seed, out.data());
  return out;
}

float normalized(const AugmentConfig& c, int channel, double value) {
  return static_cast<float>((value / 255.0 - c.mean[channel]) / c.std[channel]);
}

// Pixel value of channel c at (y, x) of a CHW output, mapped back to the 0..255 scale.
double raw_value(const AugmentConfig& c, const std::vector<float>& out, int size, int ch, int y, int x) {
  const float v = out[(static_cast<std::size_t>(ch) * size + y) * size + x];
  return (v * c.std[ch] + c.mean[ch]) * 255.0;
}

double raw_mean(const AugmentConfig& c, const std::vector<float>& out, int size) {
  double sum = 0;
  for (int ch = 0; ch < 3; ++ch)
    for (int y = 0; y < size; ++y)
      for (int x = 0; x < size; ++x) sum += raw_value(c, out, size, ch, y, x);
  return sum / (3.0 * size * size);
}

// ---- Rng -------------------------------------------------------------------------------------

TEST(Random, SameSeedSameStreamDifferentSeedDifferent) {
  Rng a(7), b(7), c(8);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const std::uint64_t x = a.next();
    EXPECT_EQ(x, b.next());
    differs |= x != c.next();
  }
  EXPECT_TRUE(differs);
}

TEST(Random, UniformMeanAndRange) {
  Rng rng(1);
  double sum = 0;
  for (int i = 0; i < 100000; ++i) {
    const double u = rng.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 100000, 0.5, 0.005);
  for (int i = 0; i < 1000; ++i) {
    const int k = rng.uniform_int(3);
    ASSERT_GE(k, 0);
    ASSERT_LT(k, 3);
  }
  EXPECT_FALSE(rng.bernoulli(0.0));
  EXPECT_TRUE(rng.bernoulli(1.0));
}

TEST(Random, NormalMoments) {
  Rng rng(2);
  double sum = 0, sq = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const double x = rng.normal();
    sum += x;
    sq += x * x;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.02);
  EXPECT_NEAR(sq / n, 1.0, 0.02);
}

TEST(Random, GammaMeanIsShape) {
  for (double shape : {0.2, 0.5, 1.0, 2.0, 5.0}) {
    Rng rng(3);
    double sum = 0;
    const int n = 50000;
    for (int i = 0; i < n; ++i) {
      const double g = rng.gamma(shape);
      ASSERT_GE(g, 0.0);
      sum += g;
    }
    EXPECT_NEAR(sum / n, shape, 0.04 * shape + 0.01) << "shape " << shape;
  }
  Rng rng(3);
  EXPECT_THROW(rng.gamma(0.0), Error);
}

TEST(Random, BetaIsSymmetricInUnitInterval) {
  for (double alpha : {0.001, 0.2, 1.0, 4.0}) {  // 0.001: both gammas underflow
    Rng rng(4);
    double sum = 0, sq = 0;
    const int n = 50000;
    for (int i = 0; i < n; ++i) {
      const double b = rng.beta(alpha);
      ASSERT_GE(b, 0.0);
      ASSERT_LE(b, 1.0);
      sum += b;
      sq += b * b;
    }
    EXPECT_NEAR(sum / n, 0.5, 0.01) << "alpha " << alpha;
    const double variance = sq / n - (sum / n) * (sum / n);
    EXPECT_NEAR(variance, 1.0 / (4.0 * (2.0 * alpha + 1.0)), 0.01) << "alpha " << alpha;
  }
}

TEST(Random, MixSeedSeparatesNeighbours) {
  EXPECT_NE(mix_seed(1, 2), mix_seed(2, 1));
  EXPECT_NE(mix_seed(1, 2), mix_seed(1, 3));
  EXPECT_NE(mix_seed(0, 0, 1), mix_seed(0, 1, 0));
  EXPECT_EQ(mix_seed(5, 6, 7), mix_seed(mix_seed(5, 6), 7));
}

// ---- configs ---------------------------------------------------------------------------------

TEST(AugmentConfigs, WorstCaseSwitchesEverythingOn) {
  AugmentConfig base = testing::plain_augment();
  base.crop_scale = {0.3, 0.6};
  base.mix_prob = 0.1;
  const AugmentConfig w = worst_case_augment(base);
  EXPECT_DOUBLE_EQ(w.brightness, 0.4);
  EXPECT_DOUBLE_EQ(w.contrast, 0.4);
  EXPECT_DOUBLE_EQ(w.saturation, 0.4);
  EXPECT_DOUBLE_EQ(w.hue, 0.1);
  EXPECT_DOUBLE_EQ(w.hflip, 1.0);
  EXPECT_EQ(w.crop_scale, (std::vector<double>{0.3, 1.0}));
  EXPECT_DOUBLE_EQ(w.mixup_alpha, 0.2);
  EXPECT_DOUBLE_EQ(w.cutmix_alpha, 1.0);
  EXPECT_DOUBLE_EQ(w.mix_prob, 1.0);
  EXPECT_TRUE(w.worst_case);
  EXPECT_EQ(w.image_size, base.image_size);

  base.brightness = 0.7;
  base.hue = 0.3;
  base.mixup_alpha = 0.8;
  const AugmentConfig kept = worst_case_augment(base);
  EXPECT_DOUBLE_EQ(kept.brightness, 0.7);
  EXPECT_DOUBLE_EQ(kept.hue, 0.3);
  EXPECT_DOUBLE_EQ(kept.mixup_alpha, 0.8);
}

TEST(AugmentConfigs, SoftTargetsFollowMixing) {
  AugmentConfig c = testing::plain_augment();
  EXPECT_FALSE(uses_soft_targets(c));
  c.cutmix_alpha = 1.0;
  EXPECT_TRUE(uses_soft_targets(c));
  c = testing::plain_augment();
  c.mixup_alpha = 0.2;
  EXPECT_TRUE(uses_soft_targets(c));
  c = testing::plain_augment();
  c.worst_case = true;
  EXPECT_TRUE(uses_soft_targets(c));
  EXPECT_DOUBLE_EQ(Augmenter(c, true).config().hflip, 1.0);
}

TEST(AugmentConfigs, RejectsMalformedLists) {
  AugmentConfig c = testing::plain_augment();
  c.mean = {0.5};
  EXPECT_THROW(Augmenter(c, true), ConfigError);
  c = testing::plain_augment();
  c.crop_scale = {0.9, 0.1};
  EXPECT_THROW(Augmenter(c, true), ConfigError);
  c = testing::plain_augment();
  c.std = {0.2, 0.0, 0.2};
  EXPECT_THROW(Augmenter(c, false), ConfigError);
}

// ---- apply -----------------------------------------------------------------------------------

TEST(AugmentApply, RejectsBadInput) {
  const Augmenter aug(testing::plain_augment(), true);
  std::vector<float> out(aug.floats_per_sample());
  EXPECT_THROW(aug.apply(cv::Mat(), 1, out.data()), DataError);
  EXPECT_THROW(aug.apply(cv::Mat(40, 40, CV_8UC1, cv::Scalar(1)), 1, out.data()), DataError);
  EXPECT_THROW(aug.apply(cv::Mat(40, 40, CV_32FC3, cv::Scalar(1)), 1, out.data()), DataError);
}

TEST(AugmentApply, SameSeedIdenticalDifferentSeedDifferent) {
  AugmentConfig c;
  c.image_size = 64;
  const Augmenter aug(c, true);
  const cv::Mat img = photo_like(120, 90, 1);
  EXPECT_EQ(aug.floats_per_sample(), 3u * 64 * 64);
  EXPECT_EQ(run(aug, img, 42), run(aug, img, 42));
  EXPECT_NE(run(aug, img, 42), run(aug, img, 43));
}

TEST(AugmentApply, OutputFiniteAndWithinNormalizedRange) {
  AugmentConfig c = worst_case_augment(AugmentConfig{});
  c.image_size = 48;
  const Augmenter aug(c, true);
  const cv::Mat img = noise_image(100, 140, 2);
  const std::size_t plane = 48 * 48;
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    const std::vector<float> out = run(aug, img, seed);
    for (std::size_t i = 0; i < out.size(); ++i) {
      const int ch = static_cast<int>(i / plane);
      ASSERT_TRUE(std::isfinite(out[i]));
      ASSERT_GE(out[i], normalized(c, ch, 0) - 1e-5f);
      ASSERT_LE(out[i], normalized(c, ch, 255) + 1e-5f);
    }
  }
}

TEST(AugmentApply, IdentityWhenNothingIsRandom) {
  AugmentConfig c = testing::plain_augment(40);
  c.crop_scale = {1.0, 1.0};
  c.crop_ratio = {1.0, 1.0};
  const Augmenter aug(c, true);
  const cv::Mat img = noise_image(40, 40, 3);
  const std::vector<float> out = run(aug, img, 9);
  for (int ch = 0; ch < 3; ++ch)
    for (int y = 0; y < 40; ++y)
      for (int x = 0; x < 40; ++x)
        ASSERT_EQ(out[(ch * 40 + y) * 40 + x], normalized(c, ch, img.at<cv::Vec3b>(y, x)[ch]));
}

TEST(AugmentApply, EvalOfConstantImageIsExactlyTheNormalizedConstant) {
  AugmentConfig c = worst_case_augment(AugmentConfig{});  // eval ignores every random op
  c.image_size = 56;
  const Augmenter aug(c, false);
  const cv::Scalar colour(10, 128, 250);
  for (const cv::Size& size : {cv::Size(300, 200), cv::Size(40, 70), cv::Size(1000, 999)}) {
    const std::vector<float> out = run(aug, cv::Mat(size, CV_8UC3, colour), 1);
    for (int ch = 0; ch < 3; ++ch)
      for (int i = 0; i < 56 * 56; ++i) ASSERT_EQ(out[ch * 56 * 56 + i], normalized(c, ch, colour[ch]));
  }
}

TEST(AugmentApply, EvalKeepsTheCentreLeftRedRightBlue) {
  const AugmentConfig c = testing::plain_augment(64);
  const Augmenter aug(c, false);
  cv::Mat img(300, 400, CV_8UC3, cv::Scalar(0, 0, 255));
  img(cv::Rect(0, 0, 200, 300)).setTo(cv::Scalar(255, 0, 0));
  const std::vector<float> out = run(aug, img, 0);
  // The split sits on the middle column; away from it, pure colours.
  for (int y = 0; y < 64; ++y)
    for (int x = 0; x < 64; ++x) {
      if (std::abs(x - 32) <= 1) continue;
      const bool left = x < 32;
      ASSERT_EQ(out[(0 * 64 + y) * 64 + x], normalized(c, 0, left ? 255 : 0)) << x;
      ASSERT_EQ(out[(2 * 64 + y) * 64 + x], normalized(c, 2, left ? 0 : 255)) << x;
    }
}

TEST(AugmentApply, EvalMatchesResizeThenCentreCrop) {
  // Ramps are kept by bilinear resampling, so each output pixel must hold the ramp value at
  // the source position that torchvision's Resize(floor(S/0.875)) + CenterCrop(S) maps it to:
  // 500x320 -> short side 73, long side int(73 * 500 / 320) = 114; crop offsets round(25) = 25
  // across and round(4.5) = 4 down (half to even).
  const int size = 64, width = 500, height = 320;
  const AugmentConfig c = testing::plain_augment(size);
  const Augmenter aug(c, false);
  EXPECT_EQ(aug.eval_resize_short_side(), 73);
  cv::Mat img(height, width, CV_8UC3);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      img.at<cv::Vec3b>(y, x) =
          cv::Vec3b(static_cast<uchar>(x * 255 / (width - 1)), static_cast<uchar>(y * 255 / (height - 1)), 77);
  const std::vector<float> out = run(aug, img, 0);
  const double scale_x = width / 114.0, scale_y = height / 73.0;  // source px per resized px
  const double left = 25, top = 4;
  for (int v = 2; v < size - 2; ++v)
    for (int u = 2; u < size - 2; ++u) {
      const double sx = (left + u + 0.5) * scale_x - 0.5, sy = (top + v + 0.5) * scale_y - 0.5;
      ASSERT_NEAR(raw_value(c, out, size, 0, v, u), sx * 255 / (width - 1), 2.5) << u << "," << v;
      ASSERT_NEAR(raw_value(c, out, size, 1, v, u), sy * 255 / (height - 1), 2.5) << u << "," << v;
      ASSERT_NEAR(raw_value(c, out, size, 2, v, u), 77.0, 1e-3);
    }
}

TEST(AugmentApply, FlipMirrorsTheSameSample) {
  // With and without jitter (two output paths); crop and jitter draws must not move.
  AugmentConfig with_jitter;
  with_jitter.image_size = 48;
  AugmentConfig without_jitter = testing::plain_augment(48);
  const cv::Mat img = photo_like(90, 130, 4);
  for (AugmentConfig c : {with_jitter, without_jitter}) {
    c.hflip = 0;
    const Augmenter plain(c, true);
    c.hflip = 1;
    const Augmenter flipped(c, true);
    for (std::uint64_t seed = 0; seed < 5; ++seed) {
      const std::vector<float> a = run(plain, img, seed), b = run(flipped, img, seed);
      for (int ch = 0; ch < 3; ++ch)
        for (int y = 0; y < 48; ++y)
          for (int x = 0; x < 48; ++x) ASSERT_EQ(b[(ch * 48 + y) * 48 + x], a[(ch * 48 + y) * 48 + 47 - x]);
    }
  }
}

// R holds the column and G the row, as ramps over 0..255.
cv::Mat coordinate_ramps(int rows, int cols) {
  cv::Mat img(rows, cols, CV_8UC3);
  for (int y = 0; y < rows; ++y)
    for (int x = 0; x < cols; ++x)
      img.at<cv::Vec3b>(y, x) = cv::Vec3b(static_cast<uchar>(std::lround(x * 255.0 / (cols - 1))),
                                          static_cast<uchar>(std::lround(y * 255.0 / (rows - 1))), 0);
  return img;
}

struct SeenCrop {
  double x, y, w, h;  // source pixels
};

// Reads a train crop's box back from the coordinate ramps at the output's corners.
SeenCrop seen_crop(const AugmentConfig& c, const std::vector<float>& out, int width, int height) {
  const int s = c.image_size;
  const double left = raw_value(c, out, s, 0, 0, 0) * (width - 1) / 255.0;
  const double right = raw_value(c, out, s, 0, 0, s - 1) * (width - 1) / 255.0;
  const double top = raw_value(c, out, s, 1, 0, 0) * (height - 1) / 255.0;
  const double bottom = raw_value(c, out, s, 1, s - 1, 0) * (height - 1) / 255.0;
  // Output pixel u samples source x + (u + 0.5) * w / s - 0.5.
  const double w = (right - left) * s / (s - 1), h = (bottom - top) * s / (s - 1);
  return {left - 0.5 * w / s + 0.5, top - 0.5 * h / s + 0.5, w, h};
}

TEST(AugmentApply, RandomResizedCropSamplesAreaRatioAndPlace) {
  const int width = 400, height = 300;
  const double area = width * height;
  AugmentConfig c = testing::plain_augment(32);
  c.crop_scale = {0.1, 0.5};
  c.crop_ratio = {0.5, 2.0};
  const Augmenter aug(c, true);
  const cv::Mat img = coordinate_ramps(height, width);
  Range scales, ratios, xs, ys;  // xs, ys: the origin as a fraction of its free range
  for (std::uint64_t seed = 0; seed < 60; ++seed) {
    const SeenCrop crop = seen_crop(c, run(aug, img, seed), width, height);
    const double scale = crop.w * crop.h / area, ratio = crop.w / crop.h;
    ASSERT_GT(scale, 0.1 * 0.93) << seed;
    ASSERT_LT(scale, 0.5 * 1.07) << seed;
    ASSERT_GT(ratio, 0.5 * 0.96) << seed;
    ASSERT_LT(ratio, 2.0 * 1.04) << seed;
    ASSERT_GT(crop.x, -2.0);
    ASSERT_LT(crop.x + crop.w, width + 2.0);
    ASSERT_GT(crop.y, -2.0);
    ASSERT_LT(crop.y + crop.h, height + 2.0);
    scales.add(scale);
    ratios.add(ratio);
    xs.add(crop.x / std::max(1.0, width - crop.w));
    ys.add(crop.y / std::max(1.0, height - crop.h));
  }
  EXPECT_LT(scales.lo, 0.2);
  EXPECT_GT(scales.hi, 0.4);
  EXPECT_LT(ratios.lo, 0.7);
  EXPECT_GT(ratios.hi, 1.4);
  EXPECT_LT(xs.lo, 0.2);
  EXPECT_GT(xs.hi, 0.8);
  EXPECT_LT(ys.lo, 0.2);
  EXPECT_GT(ys.hi, 0.8);
}

TEST(AugmentApply, ShrinkingAveragesDetailInsteadOfAliasing) {
  // One-pixel stripes shrunk 3x and 8x must come out as flat mid gray, as with PIL's
  // antialiased resize; plain bilinear would pick single stripes (0 or 255).
  for (int factor : {3, 8}) {
    const int size = 16;
    AugmentConfig c = testing::plain_augment(size);
    c.crop_scale = {1.0, 1.0};
    c.crop_ratio = {1.0, 1.0};
    const Augmenter aug(c, true);
    cv::Mat stripes(size * factor, size * factor, CV_8UC3, cv::Scalar(0, 0, 0));
    for (int x = 0; x < stripes.cols; x += 2) stripes.col(x).setTo(cv::Scalar(255, 255, 255));
    const std::vector<float> out = run(aug, stripes, 1);
    for (int y = 0; y < size; ++y)
      for (int x = 1; x < size - 1; ++x) ASSERT_NEAR(raw_value(c, out, size, 0, y, x), 127.5, 12.0) << factor;
  }
}

TEST(AugmentApply, RandomResizedCropFallsBackToTheCentre) {
  // A square of the whole area never fits 400x300, so every try fails: the centre 300x300.
  // (Output 160: one bilinear step, no halving, so the geometry is exact.)
  const int size = 160, width = 400, height = 300;
  AugmentConfig c = testing::plain_augment(size);
  c.crop_scale = {1.0, 1.0};
  c.crop_ratio = {1.0, 1.0};
  const Augmenter aug(c, true);
  const std::vector<float> out = run(aug, coordinate_ramps(height, width), 5);
  for (int u = 1; u < size - 1; ++u) {
    const double source_x = 50 + (u + 0.5) * 300 / size - 0.5;
    ASSERT_NEAR(raw_value(c, out, size, 0, size / 2, u), source_x * 255 / (width - 1), 1.0) << u;
  }
}

// Input values stay in [96, 160], so no op here reaches the clamps at 0 and 255.
cv::Mat mid_range_image(int size, int seed) {
  cv::Mat img(size, size, CV_8UC3);
  cv::RNG(seed).fill(img, cv::RNG::UNIFORM, 96, 161);
  return img;
}

double gray(const cv::Vec3d& rgb) { return 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]; }

// Checks out = f * in + (1 - f) * reference(pixel) with one f for the whole sample; sets f.
template <typename Reference>
void expect_blend(const AugmentConfig& c, const cv::Mat& img, const std::vector<float>& out, Reference reference,
                  double* factor) {
  const int size = img.cols;
  double f = 0, widest = 0;
  for (int y = 0; y < size; ++y)  // f from the pixel farthest from its reference: best conditioned
    for (int x = 0; x < size; ++x)
      for (int ch = 0; ch < 3; ++ch) {
        const double in = img.at<cv::Vec3b>(y, x)[ch], ref = reference(y, x);
        if (std::abs(in - ref) > widest) {
          widest = std::abs(in - ref);
          f = (raw_value(c, out, size, ch, y, x) - ref) / (in - ref);
        }
      }
  *factor = f;
  for (int y = 0; y < size; ++y)
    for (int x = 0; x < size; ++x)
      for (int ch = 0; ch < 3; ++ch) {
        const double in = img.at<cv::Vec3b>(y, x)[ch], ref = reference(y, x);
        ASSERT_NEAR(raw_value(c, out, size, ch, y, x), ref + f * (in - ref), 0.01) << ch << " at " << x << "," << y;
      }
}

TEST(AugmentApply, JitterOpsBlendLikeTorchvision) {
  const int size = 16;
  const cv::Mat img = mid_range_image(size, 8);
  AugmentConfig base = testing::plain_augment(size);
  base.crop_scale = {1.0, 1.0};
  base.crop_ratio = {1.0, 1.0};
  double mean_gray = 0;
  for (int y = 0; y < size; ++y)
    for (int x = 0; x < size; ++x) mean_gray += gray(img.at<cv::Vec3b>(y, x)) / (size * size);
  auto black = [](int, int) { return 0.0; };
  auto mean = [&](int, int) { return mean_gray; };
  auto own_gray = [&](int y, int x) { return gray(img.at<cv::Vec3b>(y, x)); };
  for (int op = 0; op < 3; ++op) {
    AugmentConfig c = base;
    (op == 0 ? c.brightness : op == 1 ? c.contrast : c.saturation) = 0.4;
    const Augmenter aug(c, true);
    Range factors;
    for (std::uint64_t seed = 0; seed < 8; ++seed) {
      const std::vector<float> out = run(aug, img, seed);
      double f = 0;
      if (op == 0) expect_blend(c, img, out, black, &f);
      if (op == 1) expect_blend(c, img, out, mean, &f);
      if (op == 2) expect_blend(c, img, out, own_gray, &f);
      ASSERT_FALSE(HasFatalFailure()) << "op " << op << " seed " << seed;
      factors.add(f);
    }
    EXPECT_GE(factors.lo, 0.6 - 1e-6) << "op " << op;
    EXPECT_LE(factors.hi, 1.4 + 1e-6) << "op " << op;
    EXPECT_GT(factors.hi - factors.lo, 0.2) << "op " << op << ": the factor does not vary with the seed";
  }
}

TEST(AugmentApply, BrightnessScalesTheMeanWithinItsRange) {
  AugmentConfig c = testing::plain_augment(32);
  c.crop_scale = {1.0, 1.0};
  c.crop_ratio = {1.0, 1.0};
  c.brightness = 0.4;
  const Augmenter aug(c, true);
  const cv::Mat img(32, 32, CV_8UC3, cv::Scalar(100, 100, 100));
  int darker = 0, brighter = 0;
  for (std::uint64_t seed = 0; seed < 40; ++seed) {
    const double mean = raw_mean(c, run(aug, img, seed), 32);
    EXPECT_GE(mean, 60.0 - 0.5);
    EXPECT_LE(mean, 140.0 + 0.5);
    darker += mean < 99.5;
    brighter += mean > 100.5;
  }
  EXPECT_GT(darker, 5);
  EXPECT_GT(brighter, 5);
}

TEST(AugmentApply, JitterLeavesNeutralImagesAlone) {
  // Contrast blends with the mean of a constant image (itself); saturation and hue do
  // nothing to gray pixels.
  AugmentConfig c = testing::plain_augment(24);
  c.contrast = 0.9;
  c.saturation = 0.9;
  c.hue = 0.5;
  const Augmenter aug(c, true);
  const cv::Mat gray(50, 60, CV_8UC3, cv::Scalar(90, 90, 90));
  for (std::uint64_t seed = 0; seed < 10; ++seed) {
    const std::vector<float> out = run(aug, gray, seed);
    for (int ch = 0; ch < 3; ++ch)
      for (int i = 0; i < 24 * 24; ++i) ASSERT_NEAR(out[ch * 24 * 24 + i], normalized(c, ch, 90), 1e-5);
  }
}

// Output pixel (y, x) of a CHW buffer back as 0..255 RGB.
cv::Vec3f output_pixel(const AugmentConfig& c, const std::vector<float>& out, int size, int y, int x) {
  return {static_cast<float>(raw_value(c, out, size, 0, y, x)), static_cast<float>(raw_value(c, out, size, 1, y, x)),
          static_cast<float>(raw_value(c, out, size, 2, y, x))};
}

cv::Vec3f to_hsv(const cv::Vec3f& rgb) {
  cv::Mat pixel(1, 1, CV_32FC3, cv::Scalar(rgb[0] / 255, rgb[1] / 255, rgb[2] / 255)), hsv;
  cv::cvtColor(pixel, hsv, cv::COLOR_RGB2HSV);  // H in degrees, S and V in [0, 1]
  return hsv.at<cv::Vec3f>(0, 0);
}

TEST(AugmentApply, HueShiftsEveryHueByOneAngleAndKeepsSaturationAndValue) {
  const int size = 8;
  AugmentConfig c = testing::plain_augment(size);
  c.crop_scale = {1.0, 1.0};
  c.crop_ratio = {1.0, 1.0};
  c.hue = 0.5;
  const Augmenter aug(c, true);
  // Saturated colours all round the circle: the per-pixel hue change must be one angle.
  cv::Mat img(size, size, CV_8UC3);
  for (int i = 0; i < size * size; ++i) {
    cv::Mat hsv(1, 1, CV_8UC3, cv::Scalar(i * 180 / (size * size), 255, 255)), rgb;
    cv::cvtColor(hsv, rgb, cv::COLOR_HSV2RGB);
    img.at<cv::Vec3b>(i / size, i % size) = rgb.at<cv::Vec3b>(0, 0);
  }
  int rotated = 0;
  for (std::uint64_t seed = 0; seed < 10; ++seed) {
    const std::vector<float> out = run(aug, img, seed);
    double first_shift = 0;
    for (int i = 0; i < size * size; ++i) {
      const cv::Vec3b in = img.at<cv::Vec3b>(i / size, i % size);
      const cv::Vec3f before = to_hsv(cv::Vec3f(in[0], in[1], in[2]));
      const cv::Vec3f after = to_hsv(output_pixel(c, out, size, i / size, i % size));
      const double shift = std::fmod(after[0] - before[0] + 720.0, 360.0);
      if (i == 0) first_shift = shift;
      const double gap = std::abs(shift - first_shift);
      ASSERT_LT(std::min(gap, 360.0 - gap), 3.0) << "pixel " << i << " seed " << seed;
      ASSERT_NEAR(after[1], before[1], 0.01);
      ASSERT_NEAR(after[2], before[2], 0.005);
    }
    rotated += std::min(first_shift, 360.0 - first_shift) > 3.0;
  }
  EXPECT_GE(rotated, 8);
}

TEST(AugmentApply, ConcurrentCallsMatchSerialOnes) {
  AugmentConfig c;
  c.image_size = 40;
  const Augmenter aug(c, true);
  const cv::Mat img = photo_like(70, 80, 5);
  std::vector<std::vector<float>> serial, parallel(16);
  for (std::uint64_t s = 0; s < 16; ++s) serial.push_back(run(aug, img, s));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int s = t; s < 16; s += 4) parallel[s] = run(aug, img, s);
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(serial, parallel);
}

// ---- mix_batch -------------------------------------------------------------------------------

struct Batch {
  std::vector<float> images;
  std::vector<std::int64_t> labels;
  std::vector<float> targets;
};

Batch make_batch(const Augmenter& aug, int batch, int num_classes) {
  Batch b;
  b.images.resize(batch * aug.floats_per_sample());
  cv::Mat wrap(1, static_cast<int>(b.images.size()), CV_32F, b.images.data());
  cv::RNG(11).fill(wrap, cv::RNG::UNIFORM, -2.0, 2.0);
  for (int i = 0; i < batch; ++i) b.labels.push_back(i % num_classes);
  b.targets.assign(static_cast<std::size_t>(batch) * num_classes, -1.0f);
  return b;
}

AugmentConfig mix_config(double mixup, double cutmix) {
  AugmentConfig c = testing::plain_augment(16);
  c.mixup_alpha = mixup;
  c.cutmix_alpha = cutmix;
  return c;
}

void expect_rows_sum_to_one(const Batch& b, int num_classes) {
  for (std::size_t i = 0; i < b.labels.size(); ++i) {
    double sum = 0;
    for (int k = 0; k < num_classes; ++k) {
      EXPECT_GE(b.targets[i * num_classes + k], 0.0f);
      sum += b.targets[i * num_classes + k];
    }
    EXPECT_NEAR(sum, 1.0, 1e-6);
  }
}

TEST(AugmentMix, NotMixedMeansOneHotAndUntouchedImages) {
  AugmentConfig never = mix_config(0.4, 1.0);
  never.mix_prob = 0.0;
  for (const AugmentConfig& c : {mix_config(0, 0), never}) {
    const Augmenter aug(c, true);
    Batch b = make_batch(aug, 6, 10);
    const std::vector<float> before = b.images;
    EXPECT_FALSE(aug.mix_batch(b.images.data(), 6, b.labels.data(), 10, 3, b.targets.data()));
    EXPECT_EQ(b.images, before);
    for (int i = 0; i < 6; ++i)
      for (int k = 0; k < 10; ++k) EXPECT_EQ(b.targets[i * 10 + k], k == b.labels[i] ? 1.0f : 0.0f);
  }
}

TEST(AugmentMix, EvalNeverMixes) {
  const Augmenter aug(mix_config(1.0, 1.0), false);
  Batch b = make_batch(aug, 4, 4);
  const std::vector<float> before = b.images;
  EXPECT_FALSE(aug.mix_batch(b.images.data(), 4, b.labels.data(), 4, 3, b.targets.data()));
  EXPECT_EQ(b.images, before);
}

TEST(AugmentMix, MixupBlendsWithTheFlippedPartner) {
  const Augmenter aug(mix_config(1.0, 0), true);
  const int batch = 5, classes = 5;
  const std::size_t n = aug.floats_per_sample();
  for (std::uint64_t seed = 0; seed < 5; ++seed) {
    Batch b = make_batch(aug, batch, classes);
    const std::vector<float> before = b.images;
    ASSERT_TRUE(aug.mix_batch(b.images.data(), batch, b.labels.data(), classes, seed, b.targets.data()));
    expect_rows_sum_to_one(b, classes);
    const float lam = b.targets[0 * classes + b.labels[0]];
    for (int i = 0; i < batch; ++i) {
      const int partner = batch - 1 - i;
      if (partner != i) {
        EXPECT_FLOAT_EQ(b.targets[i * classes + b.labels[i]], lam);
      }
      for (std::size_t k = 0; k < n; ++k)
        ASSERT_NEAR(b.images[i * n + k], lam * before[i * n + k] + (1 - lam) * before[partner * n + k], 1e-5);
    }
  }
}

TEST(AugmentMix, CutmixPastesARectangleFromThePartner) {
  const Augmenter aug(mix_config(0, 1.0), true);
  const int batch = 4, classes = 4, s = aug.output_size();
  const std::size_t n = aug.floats_per_sample();
  int boxes = 0;
  for (std::uint64_t seed = 0; seed < 10; ++seed) {
    Batch b = make_batch(aug, batch, classes);
    const std::vector<float> before = b.images;
    ASSERT_TRUE(aug.mix_batch(b.images.data(), batch, b.labels.data(), classes, seed, b.targets.data()));
    expect_rows_sum_to_one(b, classes);
    for (int i = 0; i < batch; ++i) {
      const int partner = batch - 1 - i;
      int pasted = 0;
      Range xs, ys;
      for (int ch = 0; ch < 3; ++ch)
        for (int y = 0; y < s; ++y)
          for (int x = 0; x < s; ++x) {
            const std::size_t k = (static_cast<std::size_t>(ch) * s + y) * s + x;
            const float v = b.images[i * n + k];
            if (v == before[i * n + k]) continue;
            ASSERT_EQ(v, before[partner * n + k]);
            ++pasted;
            xs.add(x);
            ys.add(y);
          }
      const float lam = b.targets[i * classes + b.labels[i]];
      if (pasted == 0) {
        EXPECT_FLOAT_EQ(lam, 1.0f);
        continue;
      }
      ++boxes;
      EXPECT_EQ(pasted, 3 * (xs.hi - xs.lo + 1) * (ys.hi - ys.lo + 1)) << "pasted pixels form a rectangle";
      EXPECT_NEAR(1.0 - lam, pasted / (3.0 * s * s), 1e-6);
    }
  }
  EXPECT_GT(boxes, 10);
}

TEST(AugmentMix, BothEnabledPicksEitherKind) {
  const Augmenter aug(mix_config(1.0, 1.0), true);
  const std::size_t n = aug.floats_per_sample();
  int cutmix = 0, mixup = 0;
  for (std::uint64_t seed = 0; seed < 40; ++seed) {
    Batch b = make_batch(aug, 2, 2);
    const std::vector<float> before = b.images;
    ASSERT_TRUE(aug.mix_batch(b.images.data(), 2, b.labels.data(), 2, seed, b.targets.data()));
    int kept = 0;
    for (std::size_t k = 0; k < n; ++k) kept += b.images[k] == before[k];
    // Cutmix keeps most pixels bit for bit outside its box; mixup changes nearly all of them.
    (kept > 0 ? cutmix : mixup)++;
  }
  EXPECT_GT(cutmix, 8);
  EXPECT_GT(mixup, 8);
}

TEST(AugmentMix, DeterministicForTheBatchSeed) {
  const Augmenter aug(mix_config(0.4, 1.0), true);
  Batch a = make_batch(aug, 4, 3), b = make_batch(aug, 4, 3);
  aug.mix_batch(a.images.data(), 4, a.labels.data(), 3, 77, a.targets.data());
  aug.mix_batch(b.images.data(), 4, b.labels.data(), 3, 77, b.targets.data());
  EXPECT_EQ(a.images, b.images);
  EXPECT_EQ(a.targets, b.targets);
}

TEST(AugmentMix, RejectsLabelsOutsideTheClasses) {
  const Augmenter aug(mix_config(1.0, 0), true);
  Batch b = make_batch(aug, 2, 2);
  b.labels[1] = 2;
  EXPECT_THROW(aug.mix_batch(b.images.data(), 2, b.labels.data(), 2, 1, b.targets.data()), DataError);
  b.labels[1] = -1;
  EXPECT_THROW(aug.mix_batch(b.images.data(), 2, b.labels.data(), 2, 1, b.targets.data()), DataError);
}

// ---- timing (run by hand: --gtest_also_run_disabled_tests --gtest_filter='*AugmentBench*') ----

double samples_per_second(const Augmenter& aug, const cv::Mat& img, int iterations) {
  std::vector<float> out(aug.floats_per_sample());
  for (int i = 0; i < 50; ++i) aug.apply(img, i, out.data());  // warm the per-thread scratch
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) aug.apply(img, 1000 + i, out.data());
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  return iterations / took.count();
}

TEST(AugmentBench, DISABLED_OneThreadSamplesPerSecond) {
  cv::setNumThreads(1);
  const cv::Mat img = photo_like(256, 341, 6);
  AugmentConfig full;  // defaults: RandomResizedCrop(224), hflip 0.5, ColorJitter(0.4, 0.4, 0.4, 0.1)
  AugmentConfig crop_only = testing::plain_augment(224);
  crop_only.hflip = 0.5;
  std::printf("train, full jitter: %.0f samples/s\n", samples_per_second(Augmenter(full, true), img, 4000));
  std::printf("train, crop+flip:   %.0f samples/s\n", samples_per_second(Augmenter(crop_only, true), img, 4000));
  std::printf("eval:               %.0f samples/s\n", samples_per_second(Augmenter(full, false), img, 4000));
  AugmentConfig mixed = full;
  mixed.mixup_alpha = 0.2;
  mixed.cutmix_alpha = 1.0;
  const Augmenter mixer(mixed, true);
  std::vector<float> batch(32 * mixer.floats_per_sample(), 0.5f), targets(32 * 12);
  std::vector<std::int64_t> labels(32, 1);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 200; ++i) mixer.mix_batch(batch.data(), 32, labels.data(), 12, i, targets.data());
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  std::printf("mix_batch(32):      %.0f samples/s\n", 200 * 32 / took.count());
}

// ---- the recipe's options: pad-and-crop, TrivialAugmentWide, random erasing -----------------

int reflect(int i, int n) { return i < 0 ? -i : (i >= n ? 2 * (n - 1) - i : i); }

// Whether `out` is `img` shifted by (dx, dy) with reflected borders.
bool is_reflected_shift(const std::vector<float>& out, const cv::Mat& img, const AugmentConfig& c, int dx, int dy) {
  const int s = img.cols;
  for (int ch = 0; ch < 3; ++ch)
    for (int y = 0; y < s; ++y)
      for (int x = 0; x < s; ++x)
        if (out[(ch * s + y) * s + x] !=
            normalized(c, ch, img.at<cv::Vec3b>(reflect(y + dy, s), reflect(x + dx, s))[ch]))
          return false;
  return true;
}

TEST(RecipeAugment, PadCropIsAReflectedShiftOfAtMostThePad) {
  AugmentConfig c = testing::plain_augment(16);
  c.pad_crop = 4;
  const Augmenter aug(c, true);
  const cv::Mat img = noise_image(16, 16, 1);
  std::set<std::pair<int, int>> shifts;
  for (std::uint64_t seed = 0; seed < 40; ++seed) {
    const auto out = run(aug, img, seed);
    bool found = false;
    for (int dy = -4; dy <= 4 && !found; ++dy)
      for (int dx = -4; dx <= 4 && !found; ++dx)
        if (is_reflected_shift(out, img, c, dx, dy)) {
          shifts.insert({dx, dy});
          found = true;
        }
    ASSERT_TRUE(found) << "seed " << seed << ": not a reflected shift within 4 px";
    EXPECT_EQ(out, run(aug, img, seed));
  }
  EXPECT_GT(shifts.size(), 10u);  // the offsets are random, not one fixed crop
}

TEST(RecipeAugment, PadCropMustBeSmallerThanTheImage) {
  AugmentConfig c = testing::plain_augment(16);
  c.pad_crop = 16;
  EXPECT_THROW(Augmenter(c, true), ConfigError);
}

TEST(RecipeAugment, TrivialMagnitudeTableIsTorchvisions) {
  EXPECT_DOUBLE_EQ(detail::trivial_magnitude(detail::TrivialOp::kShearX, 30), 0.99);
  EXPECT_DOUBLE_EQ(detail::trivial_magnitude(detail::TrivialOp::kTranslateY, 30), 32.0);
  EXPECT_DOUBLE_EQ(detail::trivial_magnitude(detail::TrivialOp::kRotate, 15), 67.5);
  EXPECT_DOUBLE_EQ(detail::trivial_magnitude(detail::TrivialOp::kBrightness, 0), 0.0);
  EXPECT_DOUBLE_EQ(detail::trivial_magnitude(detail::TrivialOp::kPosterize, 0), 8.0);
  EXPECT_DOUBLE_EQ(detail::trivial_magnitude(detail::TrivialOp::kPosterize, 30), 2.0);
  EXPECT_DOUBLE_EQ(detail::trivial_magnitude(detail::TrivialOp::kSolarize, 0), 255.0);
  EXPECT_DOUBLE_EQ(detail::trivial_magnitude(detail::TrivialOp::kSolarize, 30), 0.0);
}

TEST(RecipeAugment, TrivialDrawsEveryOpAndBothSigns) {
  Rng rng(3);
  std::set<int> ops;
  bool negative = false, positive = false;
  for (int i = 0; i < 2000; ++i) {
    const detail::TrivialChoice c = detail::draw_trivial_augment(rng);
    ops.insert(static_cast<int>(c.op));
    if (c.op == detail::TrivialOp::kRotate) {
      ASSERT_LE(std::fabs(c.magnitude), 135.0);
      negative = negative || c.magnitude < 0;
      positive = positive || c.magnitude > 0;
    }
  }
  EXPECT_EQ(ops.size(), static_cast<std::size_t>(detail::kTrivialOps));
  EXPECT_TRUE(negative && positive);
}

// On a deep copy: a cv::Mat passed by value shares its pixels.
cv::Mat apply_op(const cv::Mat& original, detail::TrivialOp op, double magnitude) {
  cv::Mat img = original.clone(), scratch;
  detail::apply_trivial_op(img, detail::TrivialChoice{op, magnitude}, scratch);
  return img;
}

TEST(RecipeAugment, TrivialPointOpsFollowTorchvision) {
  cv::Mat img(1, 4, CV_8UC3);
  const int values[4] = {10, 100, 200, 255};
  for (int x = 0; x < 4; ++x) img.at<cv::Vec3b>(0, x) = cv::Vec3b(values[x], values[x], values[x]);
  const cv::Mat poster = apply_op(img, detail::TrivialOp::kPosterize, 2);  // keeps the top 2 bits
  EXPECT_EQ(poster.at<cv::Vec3b>(0, 1)[0], 64);
  EXPECT_EQ(poster.at<cv::Vec3b>(0, 2)[0], 192);
  const cv::Mat solar = apply_op(img, detail::TrivialOp::kSolarize, 150);  // inverts from the threshold up
  EXPECT_EQ(solar.at<cv::Vec3b>(0, 1)[0], 100);
  EXPECT_EQ(solar.at<cv::Vec3b>(0, 2)[0], 55);
  const cv::Mat bright = apply_op(img, detail::TrivialOp::kBrightness, 0.5);  // x 1.5, clamped, truncated
  EXPECT_EQ(bright.at<cv::Vec3b>(0, 0)[0], 15);
  EXPECT_EQ(bright.at<cv::Vec3b>(0, 2)[0], 255);
  const cv::Mat stretched = apply_op(img, detail::TrivialOp::kAutoContrast, 0);
  EXPECT_EQ(stretched.at<cv::Vec3b>(0, 0)[0], 0);
  EXPECT_GE(stretched.at<cv::Vec3b>(0, 3)[0], 254);  // 255 up to the float rounding torchvision has too
  EXPECT_EQ(stretched.at<cv::Vec3b>(0, 1)[0], static_cast<int>((100 - 10) * 255.0 / 245.0));
}

TEST(RecipeAugment, TrivialGeometryMovesPixelsAndFillsBlack) {
  const cv::Mat img = noise_image(8, 8, 2);
  const cv::Mat moved = apply_op(img, detail::TrivialOp::kTranslateX, 3.0);
  for (int y = 0; y < 8; ++y)
    for (int x = 0; x < 8; ++x)
      ASSERT_EQ(moved.at<cv::Vec3b>(y, x), x < 3 ? cv::Vec3b(0, 0, 0) : img.at<cv::Vec3b>(y, x - 3)) << x << "," << y;
  const cv::Mat same = apply_op(img, detail::TrivialOp::kRotate, 0.0);
  EXPECT_EQ(cv::norm(same, img, cv::NORM_INF), 0.0);
  const cv::Mat half_turn = apply_op(img, detail::TrivialOp::kRotate, 180.0);
  EXPECT_EQ(half_turn.at<cv::Vec3b>(0, 0), img.at<cv::Vec3b>(7, 7));
}

TEST(RecipeAugment, TrivialAugmentChangesImagesDeterministically) {
  AugmentConfig c = testing::plain_augment(32);
  c.crop_scale = {1.0, 1.0};
  c.crop_ratio = {1.0, 1.0};
  const Augmenter off(c, true);
  c.auto_augment = AutoAugment::kTrivial;
  const Augmenter on(c, true);
  const cv::Mat img = noise_image(32, 32, 4);
  int changed = 0;
  for (std::uint64_t seed = 0; seed < 30; ++seed) {
    const auto out = run(on, img, seed);
    EXPECT_EQ(out, run(on, img, seed));
    if (out != run(off, img, seed)) ++changed;
  }
  EXPECT_GE(changed, 20);  // identity (1 op in 14) and zero magnitudes leave a few alone
}

TEST(RecipeAugment, RandomErasingZeroesOneBoxOfTheAllowedArea) {
  AugmentConfig c = testing::plain_augment(32);
  c.crop_scale = {1.0, 1.0};
  c.crop_ratio = {1.0, 1.0};
  c.mean = {0.0, 0.0, 0.0};  // every pixel of the noise image is then > 0 unless erased (value 0 excepted)
  const Augmenter off(c, true);
  c.random_erasing = 1.0;
  const Augmenter on(c, true);
  cv::Mat img = noise_image(32, 32, 5);
  img.setTo(cv::Scalar(1, 1, 1), img == 0);
  int erased_images = 0;
  for (std::uint64_t seed = 0; seed < 30; ++seed) {
    const auto out = run(on, img, seed);
    EXPECT_EQ(out, run(on, img, seed));
    int zeros = 0, x0 = 32, x1 = -1, y0 = 32, y1 = -1;
    for (int y = 0; y < 32; ++y)
      for (int x = 0; x < 32; ++x)
        if (out[y * 32 + x] == 0.0f) {
          ++zeros;
          x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
        }
    if (zeros == 0) continue;  // ten tries without a fitting box: torchvision leaves it too
    ++erased_images;
    EXPECT_EQ(zeros, (x1 - x0 + 1) * (y1 - y0 + 1)) << "a filled rectangle";
    EXPECT_GE(zeros, static_cast<int>(0.02 * 1024 * 0.5));
    EXPECT_LE(zeros, static_cast<int>(0.33 * 1024 * 1.5));
    for (int ch = 1; ch < 3; ++ch) EXPECT_EQ(out[(ch * 32 + y0) * 32 + x0], 0.0f);
  }
  EXPECT_GE(erased_images, 25);
  for (std::uint64_t seed = 0; seed < 5; ++seed)  // probability 0: nothing erased
    for (float v : run(off, img, seed)) ASSERT_GT(v, 0.0f);
}

TEST(RecipeConfig, KeysAreDeclaredAndRangeCheckedByName) {
  const Config c = load_config(std::nullopt, {"augment.pad_crop=4", "augment.auto_augment=trivial",
                                              "augment.random_erasing=0.25", "schedule.name=one_cycle",
                                              "schedule.pct_start=0.2", "train.ema_decay=0.99", "model.drop_path=0.1"});
  EXPECT_EQ(c.augment.pad_crop, 4);
  EXPECT_EQ(c.augment.auto_augment, AutoAugment::kTrivial);
  EXPECT_DOUBLE_EQ(c.augment.random_erasing, 0.25);
  EXPECT_EQ(c.schedule.name, ScheduleKind::kOneCycle);
  EXPECT_DOUBLE_EQ(c.schedule.pct_start, 0.2);
  EXPECT_DOUBLE_EQ(c.train.ema_decay, 0.99);
  EXPECT_DOUBLE_EQ(c.model.drop_path, 0.1);
  for (const char* bad : {"augment.pad_crop=-1", "augment.auto_augment=rand", "augment.random_erasing=1.5",
                          "schedule.pct_start=2", "train.ema_decay=1", "model.drop_path=1.5"}) {
    const std::string key = std::string(bad).substr(0, std::string(bad).find('='));
    try {
      load_config(std::nullopt, {bad});
      ADD_FAILURE() << bad << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace shoplens
