// The recipe's augmentations: pad-and-crop, TrivialAugmentWide, random erasing (docs/TRAINING.md).
#include <cmath>
#include <set>
#include <vector>

#include <gtest/gtest.h>
#include <opencv2/core.hpp>

#include "data/trivial_augment.h"
#include "shoplens/core/config.h"
#include "shoplens/core/errors.h"
#include "shoplens/data/augment.h"

namespace shoplens {
namespace {

using detail::TrivialChoice;
using detail::TrivialOp;

AugmentConfig plain(int size) {
  AugmentConfig c;
  c.image_size = size;
  c.hflip = 0;
  c.brightness = c.contrast = c.saturation = c.hue = 0;
  return c;
}

cv::Mat noise(int rows, int cols, int seed) {
  cv::Mat img(rows, cols, CV_8UC3);
  cv::RNG rng(seed);
  rng.fill(img, cv::RNG::UNIFORM, 0, 256);
  return img;
}

std::vector<float> run(const Augmenter& aug, const cv::Mat& img, std::uint64_t seed) {
  std::vector<float> out(aug.floats_per_sample());
  aug.apply(img, seed, out.data());
  return out;
}

float normalized(const AugmentConfig& c, int ch, int v) {
  return static_cast<float>((v / 255.0 - c.mean[ch]) / c.std[ch]);
}

int reflect(int i, int n) { return i < 0 ? -i : (i >= n ? 2 * (n - 1) - i : i); }

// Whether `out` is `img` shifted by (dx, dy) with reflected borders.
bool is_reflected_shift(const std::vector<float>& out, const cv::Mat& img, const AugmentConfig& c, int dx, int dy) {
  const int s = img.cols;
  for (int ch = 0; ch < 3; ++ch)
    for (int y = 0; y < s; ++y)
      for (int x = 0; x < s; ++x)
        if (out[(ch * s + y) * s + x] != normalized(c, ch, img.at<cv::Vec3b>(reflect(y + dy, s), reflect(x + dx, s))[ch]))
          return false;
  return true;
}

TEST(RecipeAugment, PadCropIsAReflectedShiftOfAtMostThePad) {
  AugmentConfig c = plain(16);
  c.pad_crop = 4;
  const Augmenter aug(c, true);
  const cv::Mat img = noise(16, 16, 1);
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
  AugmentConfig c = plain(16);
  c.pad_crop = 16;
  EXPECT_THROW(Augmenter(c, true), ConfigError);
  c.pad_crop = 0;
  c.auto_augment = "rand";
  EXPECT_THROW(Augmenter(c, true), ConfigError);
}

TEST(RecipeAugment, TrivialMagnitudeTableIsTorchvisions) {
  EXPECT_DOUBLE_EQ(detail::trivial_magnitude(TrivialOp::kShearX, 30), 0.99);
  EXPECT_DOUBLE_EQ(detail::trivial_magnitude(TrivialOp::kTranslateY, 30), 32.0);
  EXPECT_DOUBLE_EQ(detail::trivial_magnitude(TrivialOp::kRotate, 15), 67.5);
  EXPECT_DOUBLE_EQ(detail::trivial_magnitude(TrivialOp::kBrightness, 0), 0.0);
  EXPECT_DOUBLE_EQ(detail::trivial_magnitude(TrivialOp::kPosterize, 0), 8.0);
  EXPECT_DOUBLE_EQ(detail::trivial_magnitude(TrivialOp::kPosterize, 30), 2.0);
  EXPECT_DOUBLE_EQ(detail::trivial_magnitude(TrivialOp::kSolarize, 0), 255.0);
  EXPECT_DOUBLE_EQ(detail::trivial_magnitude(TrivialOp::kSolarize, 30), 0.0);
}

TEST(RecipeAugment, TrivialDrawsEveryOpAndBothSigns) {
  Rng rng(3);
  std::set<int> ops;
  bool negative = false, positive = false;
  for (int i = 0; i < 2000; ++i) {
    const TrivialChoice c = detail::draw_trivial_augment(rng);
    ops.insert(static_cast<int>(c.op));
    if (c.op == TrivialOp::kRotate) {
      ASSERT_LE(std::fabs(c.magnitude), 135.0);
      negative = negative || c.magnitude < 0;
      positive = positive || c.magnitude > 0;
    }
  }
  EXPECT_EQ(ops.size(), static_cast<std::size_t>(detail::kTrivialOps));
  EXPECT_TRUE(negative && positive);
}

// On a deep copy: a cv::Mat passed by value shares its pixels.
cv::Mat apply_op(const cv::Mat& original, TrivialOp op, double magnitude) {
  cv::Mat img = original.clone(), scratch;
  detail::apply_trivial_op(img, TrivialChoice{op, magnitude}, scratch);
  return img;
}

TEST(RecipeAugment, TrivialPointOpsFollowTorchvision) {
  cv::Mat img(1, 4, CV_8UC3);
  const int values[4] = {10, 100, 200, 255};
  for (int x = 0; x < 4; ++x) img.at<cv::Vec3b>(0, x) = cv::Vec3b(values[x], values[x], values[x]);
  const cv::Mat poster = apply_op(img, TrivialOp::kPosterize, 2);  // keeps the top 2 bits
  EXPECT_EQ(poster.at<cv::Vec3b>(0, 1)[0], 64);
  EXPECT_EQ(poster.at<cv::Vec3b>(0, 2)[0], 192);
  const cv::Mat solar = apply_op(img, TrivialOp::kSolarize, 150);  // inverts from the threshold up
  EXPECT_EQ(solar.at<cv::Vec3b>(0, 1)[0], 100);
  EXPECT_EQ(solar.at<cv::Vec3b>(0, 2)[0], 55);
  const cv::Mat bright = apply_op(img, TrivialOp::kBrightness, 0.5);  // x 1.5, clamped, truncated
  EXPECT_EQ(bright.at<cv::Vec3b>(0, 0)[0], 15);
  EXPECT_EQ(bright.at<cv::Vec3b>(0, 2)[0], 255);
  const cv::Mat stretched = apply_op(img, TrivialOp::kAutoContrast, 0);
  EXPECT_EQ(stretched.at<cv::Vec3b>(0, 0)[0], 0);
  EXPECT_GE(stretched.at<cv::Vec3b>(0, 3)[0], 254);  // 255 up to the float rounding torchvision has too
  EXPECT_EQ(stretched.at<cv::Vec3b>(0, 1)[0], static_cast<int>((100 - 10) * 255.0 / 245.0));
}

TEST(RecipeAugment, TrivialGeometryMovesPixelsAndFillsBlack) {
  const cv::Mat img = noise(8, 8, 2);
  const cv::Mat moved = apply_op(img, TrivialOp::kTranslateX, 3.0);
  for (int y = 0; y < 8; ++y)
    for (int x = 0; x < 8; ++x)
      ASSERT_EQ(moved.at<cv::Vec3b>(y, x), x < 3 ? cv::Vec3b(0, 0, 0) : img.at<cv::Vec3b>(y, x - 3)) << x << "," << y;
  const cv::Mat same = apply_op(img, TrivialOp::kRotate, 0.0);
  EXPECT_EQ(cv::norm(same, img, cv::NORM_INF), 0.0);
  const cv::Mat half_turn = apply_op(img, TrivialOp::kRotate, 180.0);
  EXPECT_EQ(half_turn.at<cv::Vec3b>(0, 0), img.at<cv::Vec3b>(7, 7));
}

TEST(RecipeAugment, TrivialAugmentChangesImagesDeterministically) {
  AugmentConfig c = plain(32);
  c.crop_scale = {1.0, 1.0};
  c.crop_ratio = {1.0, 1.0};
  const Augmenter off(c, true);
  c.auto_augment = "trivial";
  const Augmenter on(c, true);
  const cv::Mat img = noise(32, 32, 4);
  int changed = 0;
  for (std::uint64_t seed = 0; seed < 30; ++seed) {
    const auto out = run(on, img, seed);
    EXPECT_EQ(out, run(on, img, seed));
    if (out != run(off, img, seed)) ++changed;
  }
  EXPECT_GE(changed, 20);  // identity (1 op in 14) and zero magnitudes leave a few alone
}

TEST(RecipeAugment, RandomErasingZeroesOneBoxOfTheAllowedArea) {
  AugmentConfig c = plain(32);
  c.crop_scale = {1.0, 1.0};
  c.crop_ratio = {1.0, 1.0};
  c.mean = {0.0, 0.0, 0.0};  // every pixel of the noise image is then > 0 unless erased (value 0 excepted)
  const Augmenter off(c, true);
  c.random_erasing = 1.0;
  const Augmenter on(c, true);
  cv::Mat img = noise(32, 32, 5);
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
  EXPECT_EQ(c.augment.auto_augment, "trivial");
  EXPECT_DOUBLE_EQ(c.augment.random_erasing, 0.25);
  EXPECT_EQ(c.schedule.name, "one_cycle");
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
