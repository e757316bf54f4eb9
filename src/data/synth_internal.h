// Private pieces of the synthetic catalog generator: a portable RNG, the product renderer
// (synth_render.cpp) and the defect processes (synth_defects.cpp).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

#include <opencv2/core.hpp>

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

std::uint64_t splitmix64(std::uint64_t& state);
// Independent streams per (seed, image, purpose): an image's content never depends on which
// thread made it or on how many random numbers another image used.
std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t index, std::uint64_t stream);

// xoshiro256** with its own distributions, so the catalog does not depend on a standard
// library's std::*_distribution implementation.
class Rng {
 public:
  explicit Rng(std::uint64_t seed);
  std::uint64_t next();
  double uniform();                       // [0, 1)
  double uniform(double lo, double hi);   // [lo, hi)
  int uniform_int(int lo, int hi);        // [lo, hi]
  bool chance(double p) { return uniform() < p; }
  double normal();
  std::size_t pick(const std::vector<double>& weights);
  std::size_t pick(std::initializer_list<double> weights) { return pick(std::vector<double>(weights)); }
  template <class T>
  void shuffle(std::vector<T>& items) {
    for (std::size_t i = items.size(); i > 1; --i)
      std::swap(items[i - 1], items[static_cast<std::size_t>(uniform_int(0, static_cast<int>(i) - 1))]);
  }

 private:
  std::uint64_t s_[4];
};

// Renders the studio (or, for background_issue, busy) scene with the product placed the way the
// defect asks: cut by the frame for cropped, twice side by side for duplicate.
cv::Mat3b render_scene(Defect defect, ProductKind kind, cv::Size size, Rng& rng);

// Camera-to-upload variation every image gets (exposure, white balance, light noise, slight
// softness), so a clean image is never pixel-perfect.
void apply_natural_variation(cv::Mat3b& image, Rng& rng);

// The pixel-level process of `defect` (scene-level defects are no-ops here).
void apply_defect(cv::Mat3b& image, Defect defect, Rng& rng);

}  // namespace shoplens::synth
