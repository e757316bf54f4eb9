// Private pieces of the synthetic catalog generator: a portable RNG, the product renderer
// (synth_render.cpp) and the defect processes (synth_defects.cpp).
#pragma once

#include <array>
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

// What one kind of product looks like and where it is listed: the renderer and the catalog read
// their per-kind choices here, so a new kind is one row (kProductKindFacts in synth_kinds.cpp).
struct ProductKindFacts {
  ProductKind kind;
  double aspect_min, aspect_max;  // height over width of its bounding box, drawn uniformly
  bool flat;                      // printed or soft goods: little shading, no highlight
  bool takes_brand;               // a brand name may be printed on it
  // Surface pattern weights: none, stripes, dots, checks, weave. All zero: always plain, and
  // no draw from the RNG.
  std::array<double, 5> texture_weights;
  // Category weights (apparel, electronics, home, beauty, toys, sports) of its listings.
  std::array<double, 6> category_weights;
};

const ProductKindFacts& product_kind_facts(ProductKind kind);

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
