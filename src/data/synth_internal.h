// Private pieces of the synthetic catalog generator: a portable RNG, the product renderer
// (synth_render.cpp) and the defect processes (synth_defects.cpp).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

#include <opencv2/core.hpp>

#include "shoplens/core/random.h"

namespace shoplens::synth {

// Label order of synth_classes().
enum class Defect : int {
  kGood = 0,
  kBlurry,
  kBackgroundIssue,
  kLowLight,
  kWatermark,
  kCropped,
  kOverexposed,
  kNoisy,
  kDuplicate,
  kLowResolution,
  kColorCast,
  kCompressionArtifacts,
};
constexpr int kNumDefects = 12;

enum class ProductKind : int { kBottle = 0, kBox, kShoe, kShirt, kMug, kPhone, kLamp, kBag };
constexpr int kNumProductKinds = 8;

using shoplens::Rng;

// Renders the studio (or, for background_issue, busy) scene with the product placed the way the
// defect asks: cut by the frame for cropped, twice side by side for duplicate.
cv::Mat3b render_scene(Defect defect, ProductKind kind, cv::Size size, Rng& rng);

// Camera-to-upload variation every image gets (exposure, white balance, light noise, slight
// softness), so a clean image is never pixel-perfect.
void apply_natural_variation(cv::Mat3b& image, Rng& rng);

// The pixel-level process of `defect` (scene-level defects are no-ops here).
void apply_defect(cv::Mat3b& image, Defect defect, Rng& rng);

}  // namespace shoplens::synth
