// The evaluation transform's geometry follows torchvision's arithmetic and its resampling keeps
// what a resampler must keep; pixel equality with Pillow itself is E2ePredict's (Python side).
#include <gtest/gtest.h>
#include <opencv2/core.hpp>

#include "shoplens/core/errors.h"
#include "shoplens/data/eval_transform.h"

namespace shoplens {
namespace {

TEST(EvalTransform, ResizeBeforeTheCropIsTimmsFloorRule) {
  EXPECT_EQ(eval_resize_short_side(224, 0.875), 256);
  EXPECT_EQ(eval_resize_short_side(96, 0.875), 109);  // floor(109.71), not round
  EXPECT_EQ(eval_resize_short_side(224, 1.0), 224);
  EXPECT_THROW(eval_resize_short_side(224, 0.0), ConfigError);
  EXPECT_THROW(eval_resize_short_side(224, 1.5), ConfigError);
}

TEST(EvalTransform, TheLongSideIsTruncatedAndTheCropOffsetRoundsHalfToEven) {
  // 500x375 -> short side 256: long side int(256 * 500 / 375) = int(341.33) = 341.
  const EvalCropPlan p = plan_eval_crop(500, 375, 256, 224);
  EXPECT_EQ(p.resized_width, 341);
  EXPECT_EQ(p.resized_height, 256);
  EXPECT_EQ(p.left, 58);  // round(58.5) = 58 in Python (half to even)
  EXPECT_EQ(p.top, 16);
  // A portrait image whose offset is 2.5 rounds to 2, and 3.5 to 4.
  EXPECT_EQ(plan_eval_crop(10, 15, 10, 10).top, 2);  // resized 10x15: (15 - 10) / 2 = 2.5
  EXPECT_EQ(plan_eval_crop(10, 17, 10, 10).top, 4);  // (17 - 10) / 2 = 3.5
}

TEST(EvalTransform, RefusesACropLargerThanTheResizedImage) {
  EXPECT_THROW(plan_eval_crop(100, 100, 64, 65), ConfigError);
  EXPECT_THROW(plan_eval_crop(0, 100, 64, 32), DataError);
}

TEST(EvalTransform, AFlatImageStaysFlatAtEveryScale) {
  for (const auto& [w, h] : {std::pair{640, 480}, std::pair{50, 70}, std::pair{73, 73}}) {
    const cv::Mat flat(h, w, CV_8UC3, cv::Scalar(17, 130, 251));
    cv::Mat out;
    resize_and_center_crop(flat, 73, 64, out);
    ASSERT_EQ(out.rows, 64);
    ASSERT_EQ(out.cols, 64);
    cv::Mat diff;
    cv::absdiff(out, cv::Scalar(17, 130, 251), diff);
    EXPECT_EQ(cv::countNonZero(diff.reshape(1)), 0) << w << "x" << h;
  }
}

TEST(EvalTransform, AnImageAlreadyAtTheResizedSizeIsOnlyCropped) {
  cv::Mat img(80, 73, CV_8UC3);
  cv::randu(img, 0, 256);
  cv::Mat out;
  resize_and_center_crop(img, 73, 64, out);
  // Resized 73x80 is the image itself; the crop starts at round(4.5) = 4 across, round(8) = 8 down.
  const cv::Mat expected = img(cv::Rect(4, 8, 64, 64));
  cv::Mat diff;
  cv::absdiff(out, expected, diff);
  EXPECT_EQ(cv::countNonZero(diff.reshape(1)), 0);
}

TEST(EvalTransform, ShrinkingAveragesInsteadOfSampling) {
  // One-pixel stripes: a sampling resize picks stripes and keeps full contrast; an antialiased
  // one averages them to mid-grey.
  cv::Mat stripes(400, 400, CV_8UC3);
  for (int x = 0; x < 400; ++x) stripes.col(x).setTo(cv::Scalar::all(x % 2 ? 255 : 0));
  cv::Mat out;
  resize_and_center_crop(stripes, 50, 40, out);
  double lo = 0, hi = 0;
  cv::minMaxLoc(out.reshape(1), &lo, &hi);
  EXPECT_GT(lo, 110);
  EXPECT_LT(hi, 145);
}

}  // namespace
}  // namespace shoplens
