// The augmentation preview: describe_augmentation must name what Augmenter::apply really drew for
// a seed (checked on the pixels), and the preview picture has a captioned tile per image.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <set>

#include "shoplens/core/config.h"
#include "shoplens/data/augment.h"
#include "shoplens/data/augment_preview.h"
#include "shoplens/data/batch.h"
#include "shoplens/data/image_io.h"
#include "image_test_util.h"
#include "test_util.h"

namespace shoplens {
namespace {

// Left half dark, right half bright: a flip shows in the first output pixel.
cv::Mat halves(int size) {
  cv::Mat img(size, size, CV_8UC3, cv::Scalar(20, 20, 20));
  img(cv::Rect(size / 2, 0, size - size / 2, size)).setTo(cv::Scalar(230, 230, 230));
  return img;
}

std::vector<float> applied(const AugmentConfig& c, const cv::Mat& rgb, std::uint64_t seed) {
  const Augmenter a(c, /*train=*/true);
  std::vector<float> out(a.floats_per_sample());
  a.apply(rgb, seed, out.data());
  return out;
}

TEST(AugmentPreview, FlipIsNamedExactlyWhenTheImageWasFlipped) {
  AugmentConfig c = testing::plain_augment(32, /*whole_image=*/true);
  c.hflip = 0.5;
  const cv::Mat img = halves(32);
  int flipped = 0;
  for (std::uint64_t seed = 1; seed <= 64; ++seed) {
    const bool said = describe_augmentation(c, seed).find("flip") != std::string::npos;
    const bool was = applied(c, img, seed)[0] > 0;  // the bright half came to the left
    EXPECT_EQ(said, was) << "seed " << seed << ": " << describe_augmentation(c, seed);
    flipped += was;
  }
  EXPECT_GT(flipped, 10);
  EXPECT_LT(flipped, 54);
}

TEST(AugmentPreview, TrivialAugmentNamesTheOpAndIdentityChangesNothing) {
  AugmentConfig c = testing::plain_augment(32, /*whole_image=*/true);
  c.auto_augment = AutoAugment::kTrivial;
  const cv::Mat img = halves(32);
  const std::vector<float> untouched = applied(testing::plain_augment(32, /*whole_image=*/true), img, 7);
  std::set<std::string> ops;
  int identities = 0;
  for (std::uint64_t seed = 1; seed <= 400; ++seed) {
    const std::string said = describe_augmentation(c, seed);
    ops.insert(said.substr(0, said.find(' ')));
    if (said != "Identity") continue;
    ++identities;
    EXPECT_EQ(applied(c, img, seed), untouched) << "seed " << seed;
  }
  EXPECT_GE(ops.size(), 12u);  // 14 ops, 400 draws
  EXPECT_GT(identities, 0);
}

TEST(AugmentPreview, EveryDrawnOpIsListedAndNothingElse) {
  AugmentConfig c = testing::plain_augment(32, /*whole_image=*/true);
  EXPECT_EQ(describe_augmentation(c, 3), "crop only");
  c.hflip = 1;
  c.brightness = 0.4;
  c.random_erasing = 1;
  EXPECT_EQ(describe_augmentation(c, 3), "flip jitter erase");
}

TEST(AugmentPreview, WritesOneCaptionedTilePerImage) {
  const testing::ScratchDir dir("preview");
  Batch batch;
  batch.images = torch::zeros({6, 3, 32, 32});
  batch.labels = torch::tensor({0, 1, 0, 1, 0, 1}, torch::kInt64);
  batch.sample_seeds = {1, 2, 3, 4, 5, 6};
  const std::filesystem::path file = dir / "preview.png";
  write_augment_preview(batch, testing::plain_augment(32, /*whole_image=*/true), /*train=*/true, {"good", "blurry"},
                        file);
  const std::vector<std::uint8_t> bytes = read_binary_file(file);
  const cv::Mat grid = decode_image(bytes.data(), bytes.size()).rgb;
  ASSERT_FALSE(grid.empty());
  EXPECT_EQ(grid.cols % 4, 0);
  const int tile = grid.cols / 4;
  EXPECT_GT(grid.rows, 2 * tile);  // two rows of tiles, each with a caption strip under it
  // The strip under the first tile has text (light pixels) on its dark background.
  const cv::Mat strip = grid(cv::Rect(0, tile, tile, grid.rows / 2 - tile));
  cv::Mat gray;
  cv::cvtColor(strip, gray, cv::COLOR_RGB2GRAY);
  EXPECT_GT(cv::countNonZero(gray > 128), 20);
}

}  // namespace
}  // namespace shoplens
