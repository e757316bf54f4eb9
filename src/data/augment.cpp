#include "shoplens/data/augment.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include <fmt/format.h>

#include "shoplens/core/errors.h"
#include "shoplens/data/augment_preview.h"
#include "shoplens/data/eval_transform.h"
#include "trivial_augment.h"

namespace shoplens {
namespace {

constexpr double kPi = 3.14159265358979323846;

// Independent random streams per decision, so switching one op on or off (say hflip 0 -> 1)
// leaves every other op's draws unchanged.
enum Stream : std::uint64_t {
  kCropStream = 1,
  kFlipStream = 2,
  kJitterStream = 3,
  kMixStream = 4,
  kAutoAugmentStream = 5,
  kErasingStream = 6
};

// ---- geometry -------------------------------------------------------------------------------

struct Box {
  int x, y, w, h;
};

// torchvision's RandomResizedCrop fallback: the whole image, or its centre clipped to the
// allowed aspect-ratio range.
Box central_crop(int width, int height, double ratio_lo, double ratio_hi) {
  const double in_ratio = static_cast<double>(width) / height;
  int w = width, h = height;
  if (in_ratio < ratio_lo) {
    h = std::max(1, static_cast<int>(std::nearbyint(w / ratio_lo)));
  } else if (in_ratio > ratio_hi) {
    w = std::max(1, static_cast<int>(std::nearbyint(h * ratio_hi)));
  }
  return {(width - w) / 2, (height - h) / 2, w, h};
}

// torchvision's RandomResizedCrop.get_params: 10 tries of (area fraction uniform in scale,
// aspect ratio log-uniform), top then left uniform; nearbyint rounds half to even like Python.
Box random_resized_crop(int width, int height, const AugmentConfig& c, Rng& rng) {
  const double area = static_cast<double>(width) * height;
  const double log_lo = std::log(c.crop_ratio[0]), log_hi = std::log(c.crop_ratio[1]);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * rng.uniform(c.crop_scale[0], c.crop_scale[1]);
    const double aspect = std::exp(rng.uniform(log_lo, log_hi));
    const int w = static_cast<int>(std::nearbyint(std::sqrt(target * aspect)));
    const int h = static_cast<int>(std::nearbyint(std::sqrt(target / aspect)));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      const int y = rng.uniform_int(height - h + 1);
      const int x = rng.uniform_int(width - w + 1);
      return {x, y, w, h};
    }
  }
  return central_crop(width, height, c.crop_ratio[0], c.crop_ratio[1]);
}

cv::Rect rect(const Box& b) { return {b.x, b.y, b.w, b.h}; }

// Scratch images, one set per thread, so concurrent calls never share pixels and the steady
// state allocates nothing.
struct Scratch {
  cv::Mat crop;               // the resized crop
  cv::Mat half[2];            // ping-pong buffers for the halving steps
  cv::Mat bytes[3];           // the crop split into channels
  std::vector<float> floats;  // the channels as floats, for the colour jitter
  cv::Mat warped;             // TrivialAugment's geometric ops and sharpness write through this
};

// Reflect-padding index (numpy/torch "reflect": the edge pixel is not repeated), for pad < n.
int reflect_index(int i, int n) {
  if (i < 0) return -i;
  if (i >= n) return 2 * (n - 1) - i;
  return i;
}

// CIFAR's RandomCrop(size, padding=pad, padding_mode="reflect") on the image first brought to
// size x size (the short side resized, then the centre, as the eval transform does): the padded
// image is never made, each output pixel reads its reflected source.
void pad_and_random_crop(const cv::Mat& rgb, int size, int pad, Rng& rng, Scratch& scratch) {
  const cv::Mat* square = &rgb;
  if (rgb.rows != size || rgb.cols != size) {
    resize_and_center_crop(rgb, size, size, scratch.half[0]);
    square = &scratch.half[0];
  }
  const int top = rng.uniform_int(2 * pad + 1) - pad, left = rng.uniform_int(2 * pad + 1) - pad;
  scratch.crop.create(size, size, CV_8UC3);
  for (int y = 0; y < size; ++y) {
    const std::uint8_t* src = square->ptr<std::uint8_t>(reflect_index(y + top, size));
    std::uint8_t* dst = scratch.crop.ptr<std::uint8_t>(y);
    for (int x = 0; x < size; ++x) {
      const std::uint8_t* p = src + 3 * reflect_index(x + left, size);
      dst[3 * x] = p[0];
      dst[3 * x + 1] = p[1];
      dst[3 * x + 2] = p[2];
    }
  }
}

// torchvision's RandomErasing(p, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=0) on the normalized
// output: with probability p, up to 10 tries for a box of that area fraction and log-uniform
// aspect ratio that fits strictly inside; every channel of it becomes 0 (the dataset mean colour,
// as torchvision's default value gives after Normalize). No box found: nothing is erased.
void random_erase(float* chw, int size, double probability, Rng& rng) {
  if (!rng.bernoulli(probability)) return;
  const double area = static_cast<double>(size) * size;
  const double log_lo = std::log(0.3), log_hi = std::log(3.3);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * rng.uniform(0.02, 0.33);
    const double aspect = std::exp(rng.uniform(log_lo, log_hi));
    const int h = static_cast<int>(std::nearbyint(std::sqrt(target * aspect)));
    const int w = static_cast<int>(std::nearbyint(std::sqrt(target / aspect)));
    if (!(h < size && w < size)) continue;
    const int top = rng.uniform_int(size - h + 1), left = rng.uniform_int(size - w + 1);
    const std::size_t plane = static_cast<std::size_t>(size) * size;
    for (int c = 0; c < 3; ++c)
      for (int y = top; y < top + h; ++y) {
        float* row = chw + c * plane + static_cast<std::size_t>(y) * size + left;
        std::fill(row, row + w, 0.0f);
      }
    return;
  }
}

// Bilinear resampling aliases once it shrinks by 2x or more, where torchvision's PIL resize
// (antialiased) would not. So while the crop is at least twice the output on both sides, it is
// halved by 2x2 pixel averaging (OpenCV's INTER_AREA, fast for exactly 2x), and bilinear does
// the remaining factor below 2. To keep every halving exact the crop is first trimmed, evenly
// on both sides, to a multiple of 2^halvings: edges move by under half an output pixel.
void crop_and_resize(const cv::Mat& rgb, Box box, int size, Scratch& scratch) {
  int halvings = 0;
  while ((box.w >> (halvings + 1)) >= size && (box.h >> (halvings + 1)) >= size) ++halvings;
  const int unit = 1 << halvings;
  box.x += (box.w % unit) / 2;
  box.y += (box.h % unit) / 2;
  box.w -= box.w % unit;
  box.h -= box.h % unit;
  cv::Mat src = rgb(rect(box));
  for (int i = 0; i < halvings; ++i) {
    cv::Mat& half = scratch.half[i % 2];
    cv::resize(src, half, cv::Size(src.cols / 2, src.rows / 2), 0, 0, cv::INTER_AREA);
    src = half;
  }
  scratch.crop.create(size, size, CV_8UC3);
  cv::resize(src, scratch.crop, scratch.crop.size(), 0, 0, cv::INTER_LINEAR);
}

// ---- colour ---------------------------------------------------------------------------------
//
// Colour jitter runs on float planes in [0, 1] with torchvision's tensor semantics (each op
// blends, then clamps to [0, 1]). On a 224x224 crop a planar float pass measured ~6x faster
// than the same op on interleaved uint8 pixels, which does not vectorize; the conversion (a
// SIMD split and convert) costs less than one such pass.

struct Planes {
  float* c[3];  // R, G, B, n values each
  int n;
};

float clamp01(float v) { return std::min(1.0f, std::max(0.0f, v)); }

// PIL's "L" weights (ITU-R 601); torchvision's tensor grayscale uses the same up to rounding.
constexpr float kGray[3] = {0.299f, 0.587f, 0.114f};

Planes to_planes(const cv::Mat& rgb, Scratch& scratch) {
  const int n = rgb.rows * rgb.cols;
  scratch.floats.resize(static_cast<std::size_t>(3) * n);
  cv::split(rgb, scratch.bytes);
  Planes planes{{}, n};
  for (int c = 0; c < 3; ++c) {
    planes.c[c] = scratch.floats.data() + static_cast<std::size_t>(c) * n;
    cv::Mat wrapped(rgb.rows, rgb.cols, CV_32F, planes.c[c]);
    scratch.bytes[c].convertTo(wrapped, CV_32F, 1.0 / 255.0);
  }
  return planes;
}

// Brightness: blend with black.
void scale(Planes& p, float f) {
  for (float* x : p.c)
    for (int i = 0; i < p.n; ++i) x[i] = std::min(1.0f, f * x[i]);
}

float gray_mean(const Planes& p) {
  double sum = 0.0;
  for (int c = 0; c < 3; ++c) sum += kGray[c] * cv::sum(cv::Mat(1, p.n, CV_32F, p.c[c]))[0];
  return static_cast<float>(sum / p.n);
}

// Contrast: blend with the mean gray level.
void blend_constant(Planes& p, float f, float constant) {
  const float k = (1.0f - f) * constant;
  for (float* x : p.c)
    for (int i = 0; i < p.n; ++i) x[i] = clamp01(f * x[i] + k);
}

// Saturation: blend each pixel with its own gray level.
void blend_gray(Planes& p, float f) {
  float* r = p.c[0];
  float* g = p.c[1];
  float* b = p.c[2];
  const float rest = 1.0f - f;
  for (int i = 0; i < p.n; ++i) {
    const float k = rest * (kGray[0] * r[i] + kGray[1] * g[i] + kGray[2] * b[i]);
    r[i] = clamp01(f * r[i] + k);
    g[i] = clamp01(f * g[i] + k);
    b[i] = clamp01(f * b[i] + k);
  }
}

// GCC's default -ftrapping-math forbids turning the selects below into vector blends (a float
// op under a condition "could trap"), which left this loop scalar and branchy: ~3x slower.
// Nothing here reads the floating-point exception flags, so lift that rule for this pass only
// (clang already defaults to it). The pass is also compiled a second time for AVX2, picked at
// load time where the CPU has it: 2-3x faster again than the SSE2 baseline (which lacks blends).
// FMA stays off so both versions give the same bits.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("no-trapping-math")
#if defined(__x86_64__)
#define SHOPLENS_HUE_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef SHOPLENS_HUE_CLONES
#define SHOPLENS_HUE_CLONES
#endif

// Defined inside this block: GCC does not inline functions compiled with other options
// (std::min and std::max included) into these.
float lesser(float a, float b) { return b < a ? b : a; }
float greater(float a, float b) { return a < b ? b : a; }

// The HSV-to-RGB weight of one channel at hexagon position k (the usual formula
// channel = V - chroma * clamp(min(k, 4 - k), 0, 1) with k = (n + H/60) mod 6).
float hexagon_weight(float k) {
  k = k >= 6.0f ? k - 6.0f : k;
  return greater(0.0f, lesser(1.0f, lesser(k, 4.0f - k)));
}

// Hue: torchvision's adjust_hue goes to HSV, adds `turns` to H modulo one turn and comes back.
// V (the largest channel) and the chroma (largest - smallest) do not change, so the round trip
// folds into one branch-free pass on the hexagon position h in [0, 6).
SHOPLENS_HUE_CLONES void rotate_hue(Planes& p, float turns) {
  const float shift = 6.0f * (turns - std::floor(turns));
  float* r = p.c[0];
  float* g = p.c[1];
  float* b = p.c[2];
  for (int i = 0; i < p.n; ++i) {
    const float red = r[i], green = g[i], blue = b[i];
    const float hi = greater(red, greater(green, blue));
    const float chroma = hi - lesser(red, lesser(green, blue));
    const float inv = 1.0f / greater(chroma, 1e-20f);  // gray: every difference below is 0
    const float from_red = (green - blue) * inv, from_green = 2.0f + (blue - red) * inv;
    const float from_blue = 4.0f + (red - green) * inv;
    float h = hi == red ? from_red : (hi == green ? from_green : from_blue);
    h += shift;
    h = h < 0.0f ? h + 6.0f : h;
    h = h >= 6.0f ? h - 6.0f : h;
    r[i] = hi - chroma * hexagon_weight(h + 5.0f);
    g[i] = hi - chroma * hexagon_weight(h + 3.0f);
    b[i] = hi - chroma * hexagon_weight(h + 1.0f);
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

enum JitterOp { kBrightness = 0, kContrast = 1, kSaturation = 2, kHue = 3 };

// torchvision's ColorJitter.get_params: a random order of the four ops, then a factor for each
// enabled op (brightness, contrast, saturation in [max(0, 1-v), 1+v]; hue in [-v, v]).
struct JitterPlan {
  std::array<int, 4> order{kBrightness, kContrast, kSaturation, kHue};
  std::array<bool, 4> enabled{};
  std::array<double, 4> factor{1.0, 1.0, 1.0, 0.0};
};

JitterPlan plan_jitter(const AugmentConfig& c, Rng& rng) {
  JitterPlan plan;
  for (int i = 3; i > 0; --i) std::swap(plan.order[i], plan.order[rng.uniform_int(i + 1)]);
  const double strength[3] = {c.brightness, c.contrast, c.saturation};
  for (int op = 0; op < 3; ++op) {
    plan.enabled[op] = strength[op] > 0;
    if (plan.enabled[op]) plan.factor[op] = rng.uniform(std::max(0.0, 1.0 - strength[op]), 1.0 + strength[op]);
  }
  plan.enabled[kHue] = c.hue > 0;
  if (plan.enabled[kHue]) plan.factor[kHue] = rng.uniform(-c.hue, c.hue);
  return plan;
}

bool any_enabled(const JitterPlan& plan) {
  return std::any_of(plan.enabled.begin(), plan.enabled.end(), [](bool on) { return on; });
}

void run_jitter(const JitterPlan& plan, Planes& planes) {
  for (int op : plan.order) {
    if (!plan.enabled[op]) continue;
    const float f = static_cast<float>(plan.factor[op]);
    switch (op) {
      case kBrightness:
        scale(planes, f);
        break;
      case kContrast:
        blend_constant(planes, f, gray_mean(planes));
        break;
      case kSaturation:
        blend_gray(planes, f);
        break;
      case kHue:
        if (f != 0.0f) rotate_hue(planes, f);
        break;
    }
  }
}

// ToTensor + Normalize (+ the horizontal flip) in one pass: HWC uint8 -> CHW float, through
// the per-channel table.
void write_chw(const cv::Mat& img, const float (&table)[3][256], bool flip, float* dst) {
  const int s = img.cols;
  const std::size_t plane = static_cast<std::size_t>(img.rows) * s;
  for (int y = 0; y < img.rows; ++y) {
    const std::uint8_t* row = img.ptr<std::uint8_t>(y);
    float* d0 = dst + static_cast<std::size_t>(y) * s;
    float* d1 = d0 + plane;
    float* d2 = d1 + plane;
    if (flip) {
      for (int x = 0; x < s; ++x) {
        const std::uint8_t* p = row + 3 * (s - 1 - x);
        d0[x] = table[0][p[0]];
        d1[x] = table[1][p[1]];
        d2[x] = table[2][p[2]];
      }
    } else {
      for (int x = 0; x < s; ++x) {
        const std::uint8_t* p = row + 3 * x;
        d0[x] = table[0][p[0]];
        d1[x] = table[1][p[1]];
        d2[x] = table[2][p[2]];
      }
    }
  }
}

// Normalize (+ the horizontal flip) from the jittered float planes.
void write_planes(const Planes& p, int size, const std::vector<double>& mean, const std::vector<double>& std, bool flip,
                  float* dst) {
  for (int c = 0; c < 3; ++c) {
    const float a = static_cast<float>(1.0 / std[c]), b = static_cast<float>(-mean[c] / std[c]);
    for (int y = 0; y < size; ++y) {
      const float* src = p.c[c] + static_cast<std::size_t>(y) * size;
      float* d = dst + static_cast<std::size_t>(c) * p.n + static_cast<std::size_t>(y) * size;
      if (flip) {
        for (int x = 0; x < size; ++x) d[x] = a * src[size - 1 - x] + b;
      } else {
        for (int x = 0; x < size; ++x) d[x] = a * src[x] + b;
      }
    }
  }
}

// ---- mixing ---------------------------------------------------------------------------------

enum class MixMode { kNone, kMixup, kCutmix };

struct MixPlan {
  MixMode mode = MixMode::kNone;
  double lam = 1.0;
  Box box{0, 0, 0, 0};
};

// timm's rand_bbox (no margin): a box of side sqrt(1-lam) times the image's, centred
// uniformly, clipped to the image.
Box cutmix_box(int size, double lam, Rng& rng) {
  const int cut = static_cast<int>(size * std::sqrt(1.0 - lam));
  const int cy = rng.uniform_int(size), cx = rng.uniform_int(size);
  const int y0 = std::clamp(cy - cut / 2, 0, size), y1 = std::clamp(cy + cut / 2, 0, size);
  const int x0 = std::clamp(cx - cut / 2, 0, size), x1 = std::clamp(cx + cut / 2, 0, size);
  return {x0, y0, x1 - x0, y1 - y0};
}

// timm's Mixup in batch mode: mixed with probability mix_prob; with both kinds on, cutmix or
// mixup 50/50; cutmix's lambda is recomputed from the clipped box.
MixPlan plan_mix(const AugmentConfig& c, int size, Rng& rng) {
  MixPlan plan;
  const bool mixup = c.mixup_alpha > 0, cutmix = c.cutmix_alpha > 0;
  if ((!mixup && !cutmix) || !rng.bernoulli(c.mix_prob)) return plan;
  const bool use_cutmix = cutmix && (!mixup || rng.bernoulli(0.5));
  plan.lam = rng.beta(use_cutmix ? c.cutmix_alpha : c.mixup_alpha);
  if (!use_cutmix) {
    plan.mode = MixMode::kMixup;
    return plan;
  }
  plan.mode = MixMode::kCutmix;
  plan.box = cutmix_box(size, plan.lam, rng);
  plan.lam = 1.0 - static_cast<double>(plan.box.w) * plan.box.h / (static_cast<double>(size) * size);
  return plan;
}

// Both samples of a pair are updated from the originals in one sweep, so nothing is read after
// it has been overwritten.
void mixup_pair(float* a, float* b, std::size_t n, float lam) {
  const float rest = 1.0f - lam;
  for (std::size_t k = 0; k < n; ++k) {
    const float x = a[k], y = b[k];
    a[k] = lam * x + rest * y;
    b[k] = lam * y + rest * x;
  }
}

void cutmix_pair(float* a, float* b, int size, const Box& box) {
  const std::size_t plane = static_cast<std::size_t>(size) * size;
  for (int c = 0; c < 3; ++c)
    for (int y = box.y; y < box.y + box.h; ++y) {
      const std::size_t offset = c * plane + static_cast<std::size_t>(y) * size + box.x;
      std::swap_ranges(a + offset, a + offset + box.w, b + offset);
    }
}

void write_targets(const std::int64_t* labels, int batch, int num_classes, double lam, float* targets) {
  std::fill(targets, targets + static_cast<std::size_t>(batch) * num_classes, 0.0f);
  for (int i = 0; i < batch; ++i) {
    float* row = targets + static_cast<std::size_t>(i) * num_classes;
    row[labels[i]] += static_cast<float>(lam);
    row[labels[batch - 1 - i]] += static_cast<float>(1.0 - lam);
  }
}

// ---- validation -----------------------------------------------------------------------------

void require(bool ok, const std::string& what) {
  if (!ok) throw ConfigError("augment." + what);
}

void validate(const AugmentConfig& c) {
  require(c.image_size > 0, "image_size: must be positive");
  require(c.crop_scale.size() == 2 && c.crop_scale[0] > 0 && c.crop_scale[0] <= c.crop_scale[1],
          "crop_scale: expected [lo, hi] with 0 < lo <= hi");
  require(c.crop_ratio.size() == 2 && c.crop_ratio[0] > 0 && c.crop_ratio[0] <= c.crop_ratio[1],
          "crop_ratio: expected [lo, hi] with 0 < lo <= hi");
  require(c.mean.size() == 3, "mean: expected 3 numbers");
  require(c.std.size() == 3 && std::all_of(c.std.begin(), c.std.end(), [](double s) { return s > 0; }),
          "std: expected 3 positive numbers");
  require(c.brightness >= 0 && c.contrast >= 0 && c.saturation >= 0, "brightness/contrast/saturation: must be >= 0");
  require(c.hue >= 0 && c.hue <= 0.5, "hue: must be in [0, 0.5]");
  require(c.mixup_alpha >= 0 && c.cutmix_alpha >= 0, "mixup_alpha/cutmix_alpha: must be >= 0");
  require(c.pad_crop >= 0 && c.pad_crop < c.image_size,
          "pad_crop: must be in [0, image_size) (reflect padding needs a wider image than the pad), got " +
              std::to_string(c.pad_crop));
  require(c.random_erasing >= 0 && c.random_erasing <= 1, "random_erasing: must be in [0, 1]");
}

// The crop: CIFAR's pad-and-crop when augment.pad_crop > 0, else RandomResizedCrop. Both draw
// from the crop stream.
void random_geometry(const cv::Mat& rgb, std::uint64_t sample_seed, const AugmentConfig& config, Scratch& scratch) {
  Rng crop_rng(mix_seed(sample_seed, kCropStream));
  if (config.pad_crop > 0) {
    pad_and_random_crop(rgb, config.image_size, config.pad_crop, crop_rng, scratch);
  } else {
    crop_and_resize(rgb, random_resized_crop(rgb.cols, rgb.rows, config, crop_rng), config.image_size, scratch);
  }
}

}  // namespace

// ---- configs --------------------------------------------------------------------------------

AugmentConfig worst_case_augment(const AugmentConfig& base) {
  AugmentConfig c = base;
  auto on = [](double value, double fallback) { return value > 0 ? value : fallback; };
  c.brightness = on(base.brightness, 0.4);
  c.contrast = on(base.contrast, 0.4);
  c.saturation = on(base.saturation, 0.4);
  c.hue = on(base.hue, 0.1);
  c.hflip = 1.0;
  c.crop_scale = {base.crop_scale.empty() ? 0.08 : base.crop_scale.front(), 1.0};
  c.mixup_alpha = on(base.mixup_alpha, 0.2);
  c.cutmix_alpha = on(base.cutmix_alpha, 1.0);
  c.mix_prob = 1.0;
  c.worst_case = true;
  return c;
}

bool uses_soft_targets(const AugmentConfig& c) { return c.mixup_alpha > 0 || c.cutmix_alpha > 0 || c.worst_case; }

// ---- Augmenter ------------------------------------------------------------------------------

Augmenter::Augmenter(const AugmentConfig& config, bool train)
    : config_(config.worst_case ? worst_case_augment(config) : config), train_(train), size_(config.image_size) {
  validate(config_);
  eval_resize_ = config_.eval_resize_short_side > 0 ? config_.eval_resize_short_side
                                                    : shoplens::eval_resize_short_side(size_, config_.eval_crop_pct);
  if (eval_resize_ < size_)
    throw ConfigError("augment.eval_resize_short_side " + std::to_string(eval_resize_) + " is below image_size " +
                      std::to_string(size_) + ": the center crop would not fit");
  for (int c = 0; c < 3; ++c)
    for (int v = 0; v < 256; ++v) lut_[c][v] = static_cast<float>((v / 255.0 - config_.mean[c]) / config_.std[c]);
}

void Augmenter::apply(const cv::Mat& rgb, std::uint64_t sample_seed, float* dst) const {
  if (rgb.empty()) throw DataError("augment: empty image");
  if (rgb.type() != CV_8UC3)
    throw DataError("augment: expected an 8-bit 3-channel image, got type " + std::to_string(rgb.type()));

  thread_local Scratch scratch;
  if (!train_) {
    resize_and_center_crop(rgb, eval_resize_, size_, scratch.crop);
    write_chw(scratch.crop, lut_, false, dst);
    return;
  }

  random_geometry(rgb, sample_seed, config_, scratch);
  if (config_.auto_augment == AutoAugment::kTrivial) {
    Rng rng(mix_seed(sample_seed, kAutoAugmentStream));
    detail::apply_trivial_op(scratch.crop, detail::draw_trivial_augment(rng), scratch.warped);
  }

  Rng flip_rng(mix_seed(sample_seed, kFlipStream));
  const bool flip = flip_rng.bernoulli(config_.hflip);

  Rng jitter_rng(mix_seed(sample_seed, kJitterStream));
  const JitterPlan plan = plan_jitter(config_, jitter_rng);
  if (!any_enabled(plan)) {
    write_chw(scratch.crop, lut_, flip, dst);
  } else {
    Planes planes = to_planes(scratch.crop, scratch);
    run_jitter(plan, planes);
    write_planes(planes, size_, config_.mean, config_.std, flip, dst);
  }
  if (config_.random_erasing > 0) {
    Rng erase_rng(mix_seed(sample_seed, kErasingStream));
    random_erase(dst, size_, config_.random_erasing, erase_rng);
  }
}

bool Augmenter::mix_batch(float* images, int batch, const std::int64_t* labels, int num_classes,
                          std::uint64_t batch_seed, float* soft_targets) const {
  for (int i = 0; i < batch; ++i)
    if (labels[i] < 0 || labels[i] >= num_classes)
      throw DataError("augment: label " + std::to_string(labels[i]) + " of sample " + std::to_string(i) +
                      " is outside [0, " + std::to_string(num_classes) + ")");

  Rng rng(mix_seed(batch_seed, kMixStream));
  const MixPlan plan = train_ ? plan_mix(config_, size_, rng) : MixPlan{};
  const std::size_t n = floats_per_sample();
  for (int i = 0; i < batch / 2; ++i) {
    float* a = images + i * n;
    float* b = images + (batch - 1 - i) * n;
    if (plan.mode == MixMode::kMixup) mixup_pair(a, b, n, static_cast<float>(plan.lam));
    if (plan.mode == MixMode::kCutmix) cutmix_pair(a, b, size_, plan.box);
  }
  write_targets(labels, batch, num_classes, plan.lam, soft_targets);
  return plan.mode != MixMode::kNone;
}

std::string describe_augmentation(const AugmentConfig& config, std::uint64_t sample_seed) {
  const AugmentConfig c = config.worst_case ? worst_case_augment(config) : config;
  std::vector<std::string> parts;
  if (c.auto_augment == AutoAugment::kTrivial) {
    Rng rng(mix_seed(sample_seed, kAutoAugmentStream));
    const detail::TrivialChoice choice = detail::draw_trivial_augment(rng);
    // Ops without a magnitude (Identity, AutoContrast, Equalize) and bin 0 print the name alone.
    parts.emplace_back(choice.magnitude == 0.0
                           ? std::string(detail::trivial_op_name(choice.op))
                           : fmt::format("{} {:g}", detail::trivial_op_name(choice.op), choice.magnitude));
  }
  Rng flip_rng(mix_seed(sample_seed, kFlipStream));
  if (flip_rng.bernoulli(c.hflip)) parts.emplace_back("flip");
  Rng jitter_rng(mix_seed(sample_seed, kJitterStream));
  if (any_enabled(plan_jitter(c, jitter_rng))) parts.emplace_back("jitter");
  if (c.random_erasing > 0) {
    Rng erase_rng(mix_seed(sample_seed, kErasingStream));
    if (erase_rng.bernoulli(c.random_erasing)) parts.emplace_back("erase");
  }
  if (parts.empty()) return c.pad_crop > 0 ? "pad-crop only" : "crop only";
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : " ") + p;
  return out;
}

}  // namespace shoplens
