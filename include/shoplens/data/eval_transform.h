// The evaluation transform of torchvision's reference recipes, bit for bit on 8-bit RGB:
//   transforms.Resize(resize_short_side)   PIL bilinear with antialiasing (Pillow's resampler)
//   transforms.CenterCrop(crop)
// Pillow resamples in two separable passes (horizontal, then vertical) with a triangle filter
// widened by the reduction factor, in 22-bit fixed point with rounding to uint8 after each
// pass. We run the same arithmetic, so the pixels equal Pillow's, but only for the output pixels
// inside the crop: the full resized image is never made.
#pragma once

#include <opencv2/core/mat.hpp>

namespace shoplens {

// timm's rule for the resize before the crop: floor(crop / crop_pct) (224 at 0.875 gives 256).
int eval_resize_short_side(int crop, double crop_pct);

// Where the crop sits in the resized image, following torchvision's arithmetic: the short side
// becomes `resize_short_side`, the long one int(resize_short_side * long / short) (truncated);
// the crop's offsets are int(round((resized - crop) / 2)) with Python's round (half to even).
struct EvalCropPlan {
  int resized_width = 0, resized_height = 0;
  int left = 0, top = 0;
  int crop = 0;
};
// ConfigError when crop > resize_short_side or either is < 1; DataError for an empty image.
EvalCropPlan plan_eval_crop(int width, int height, int resize_short_side, int crop);

// `rgb` is CV_8UC3; `out` becomes crop x crop CV_8UC3, equal to Pillow's Resize + CenterCrop.
void resize_and_center_crop(const cv::Mat& rgb, int resize_short_side, int crop, cv::Mat& out);

}  // namespace shoplens
