// TrivialAugmentWide (Mueller & Hutter 2021) as torchvision implements it: one op per image,
// drawn uniformly from 14, with a magnitude drawn uniformly from 31 bins (signed ops get a random
// sign). Works in place on 8-bit RGB pixels (CV_8UC3, used only as a pixel container: every op is
// written out here), with torchvision's tensor semantics: nearest-neighbour geometry with a black
// fill, uint8 blends truncated, equalize and autocontrast per channel. Internal to the augmenter;
// the unit tests reach the single ops.
#pragma once

#include <opencv2/core/mat.hpp>

#include "shoplens/core/random.h"

namespace shoplens::detail {

// In torchvision's order (TrivialAugmentWide._augmentation_space).
enum class TrivialOp {
  kIdentity,
  kShearX,
  kShearY,
  kTranslateX,
  kTranslateY,
  kRotate,
  kBrightness,
  kColor,
  kContrast,
  kSharpness,
  kPosterize,
  kSolarize,
  kAutoContrast,
  kEqualize
};
constexpr int kTrivialOps = 14;
constexpr int kTrivialBins = 31;

struct TrivialChoice {
  TrivialOp op = TrivialOp::kIdentity;
  double magnitude = 0.0;  // signed where the op is; posterize: bits kept; solarize: threshold
};

// torchvision's name of the op ("Rotate", "Posterize", ...).
const char* trivial_op_name(TrivialOp op);

// The op and magnitude of one image: op uniform, bin uniform in [0, 31), then a fair sign.
TrivialChoice draw_trivial_augment(Rng& rng);
// The magnitude of `bin` for `op` before any sign (torchvision's table).
double trivial_magnitude(TrivialOp op, int bin);
// Applies one op in place; `scratch` is a buffer the geometric ops and sharpness write through.
void apply_trivial_op(cv::Mat& rgb, const TrivialChoice& choice, cv::Mat& scratch);

}  // namespace shoplens::detail
