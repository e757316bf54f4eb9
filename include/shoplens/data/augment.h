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
#include "shoplens/core/random.h"

namespace shoplens {

// The largest-footprint variant of `base`: every op on, flip always, mixup and cutmix on with
// soft targets, crop scale up to the whole image. The batch finder probes with this.
AugmentConfig worst_case_augment(const AugmentConfig& base);

// True when batches carry soft targets (mixup or cutmix enabled, or worst case).
bool uses_soft_targets(const AugmentConfig& config);

class Augmenter {
 public:
  // `train` selects RandomResizedCrop+flip+jitter; otherwise the eval transform: torchvision's
  // Resize(eval_resize_short_side()) + CenterCrop(image_size), Pillow's pixels (eval_transform.h). With
  // `config.worst_case` the augmenter runs worst_case_augment(config). Throws ConfigError on malformed lists.
  Augmenter(const AugmentConfig& config, bool train);

  const AugmentConfig& config() const { return config_; }
  int output_size() const { return size_; }
  // The short side the eval transform resizes to before its center crop.
  int eval_resize_short_side() const { return eval_resize_; }
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
  int eval_resize_ = 0;
  float lut_[3][256];  // uint8 -> normalized float, per channel
};

}  // namespace shoplens
