// Per-sample augmentation on decoded uint8 RGB images, written straight into the float CHW
// batch buffer (no intermediate tensors), plus batch-level mixup/cutmix on that buffer.
// Every random choice comes from a seed, so a sample's augmentation depends only on
// (run seed, epoch, position) and never on thread scheduling.
//
// The train transform follows torchvision's RandomResizedCrop -> RandomHorizontalFlip ->
// ColorJitter -> ToTensor -> Normalize, so side-by-side benchmarks compare equal work. All of it
// runs on the already resized crop: without jitter, uint8 pixels go through a per-channel
// normalisation table straight into the output; with jitter, on float planes with torchvision's
// tensor semantics. The flip happens while writing the output.
#pragma once

#include <cstdint>
#include <vector>

#include <opencv2/core/mat.hpp>

#include "shoplens/core/config.h"

namespace shoplens {

// Small, fast, platform-stable RNG (splitmix64 seeding + xoshiro256**), so results do not
// depend on the standard library's distribution implementations.
class Rng {
 public:
  explicit Rng(std::uint64_t seed);
  std::uint64_t next();
  double uniform();                         // [0, 1), from the top 53 bits
  double uniform(double lo, double hi);     // [lo, hi)
  int uniform_int(int n);                   // [0, n), n > 0
  bool bernoulli(double p);                 // p <= 0 never, p >= 1 always
  double beta(double alpha);                // Beta(alpha, alpha)
  double gamma(double shape);               // Gamma(shape, 1), Marsaglia-Tsang
  double normal();                          // N(0, 1), Box-Muller

 private:
  std::uint64_t s_[4];
};

// Combines seeds (run seed, epoch, index, ...) into one well-mixed 64-bit seed. For a fixed
// first argument, distinct second arguments give distinct results (and vice versa).
std::uint64_t mix_seed(std::uint64_t a, std::uint64_t b);
std::uint64_t mix_seed(std::uint64_t a, std::uint64_t b, std::uint64_t c);

// The largest-footprint variant of `base`: every op on, flip always, mixup and cutmix on with
// soft targets, crop scale up to the whole image. The batch finder probes with this.
AugmentConfig worst_case_augment(const AugmentConfig& base);

// True when batches carry soft targets (mixup or cutmix enabled, or worst case).
bool uses_soft_targets(const AugmentConfig& config);

class Augmenter {
 public:
  // `train` selects RandomResizedCrop+flip+jitter; otherwise the eval transform
  // (resize short side to image_size/0.875, center crop). With `config.worst_case` the
  // augmenter runs worst_case_augment(config). Throws ConfigError on malformed lists.
  Augmenter(const AugmentConfig& config, bool train);

  const AugmentConfig& config() const { return config_; }
  int output_size() const { return size_; }
  std::size_t floats_per_sample() const { return static_cast<std::size_t>(3) * size_ * size_; }

  // `rgb` is CV_8UC3 in RGB order (throws DataError otherwise, or when empty). Writes 3*S*S
  // normalized floats (CHW) to `dst`. Thread-safe: scratch buffers are per thread.
  void apply(const cv::Mat& rgb, std::uint64_t sample_seed, float* dst) const;

  // Mixes a batch in place: images is [batch, 3, S, S]; labels are class indices (DataError
  // when outside [0, num_classes)); soft_targets ([batch, num_classes]) always receives the
  // targets, one-hot when the batch is not mixed. Sample i is mixed with sample batch-1-i
  // (timm's flipped batch) using one lambda per batch. Eval augmenters never mix.
  // Returns true when the batch was mixed.
  bool mix_batch(float* images, int batch, const std::int64_t* labels, int num_classes, std::uint64_t batch_seed,
                 float* soft_targets) const;

 private:
  AugmentConfig config_;
  bool train_;
  int size_;
  float lut_[3][256];  // uint8 -> normalized float, per channel
};

}  // namespace shoplens
