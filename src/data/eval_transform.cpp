// Pillow's bilinear resampler (Resample.c: precompute_coeffs, normalize_coeffs_8bpc and the two
// 8-bit passes) restricted to the output pixels a center crop keeps. Every constant and rounding
// step is Pillow's, since the point is to produce its pixels exactly.
#include "shoplens/data/eval_transform.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "shoplens/core/errors.h"

namespace shoplens {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;

double triangle(double x) {
  x = std::abs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

// Fixed-point taps of output positions [first, first + count) of an `in_size` -> `out_size`
// resampling: tap t of position p weighs input pixel start[p] + t.
struct Taps {
  int width = 0;  // taps per position (Pillow's ksize)
  std::vector<int> start, count;
  std::vector<std::int32_t> weights;
};

Taps taps_for(int in_size, int out_size, int first, int count) {
  const double scale = static_cast<double>(in_size) / out_size;
  const double filter_scale = std::max(scale, 1.0);
  const double support = 1.0 * filter_scale;  // the triangle's support is 1
  Taps t;
  t.width = static_cast<int>(std::ceil(support)) * 2 + 1;
  t.start.resize(count);
  t.count.resize(count);
  t.weights.assign(static_cast<std::size_t>(count) * t.width, 0);
  std::vector<double> w(t.width);
  for (int p = 0; p < count; ++p) {
    const double center = (first + p + 0.5) * scale;
    // PIL's own bounds, truncating (int)(x + 0.5), so the taps match Pillow's exactly.
    const int lo = std::max(0, static_cast<int>(center - support + 0.5));  // NOLINT(bugprone-incorrect-roundings)
    const int n =
        std::min(in_size, static_cast<int>(center + support + 0.5)) - lo;  // NOLINT(bugprone-incorrect-roundings)
    double sum = 0.0;
    for (int x = 0; x < n; ++x) sum += (w[x] = triangle((x + lo - center + 0.5) / filter_scale));
    for (int x = 0; x < n; ++x) {
      const double k = sum != 0.0 ? w[x] / sum : w[x];
      t.weights[static_cast<std::size_t>(p) * t.width + x] =
          static_cast<std::int32_t>(k < 0 ? -0.5 + k * (1 << kPrecisionBits) : 0.5 + k * (1 << kPrecisionBits));
    }
    t.start[p] = lo;
    t.count[p] = n;
  }
  return t;
}

std::uint8_t clip8(std::int32_t v) {
  if (v >= (1 << kPrecisionBits << 8)) return 255;
  if (v <= 0) return 0;
  return static_cast<std::uint8_t>(v >> kPrecisionBits);
}

// Horizontal pass over source rows [row0, row0 + rows.rows): one output row per source row.
void resample_rows(const cv::Mat& src, int row0, const Taps& h, cv::Mat& rows) {
  const int out_w = static_cast<int>(h.start.size());
  for (int y = 0; y < rows.rows; ++y) {
    const std::uint8_t* in = src.ptr<std::uint8_t>(row0 + y);
    std::uint8_t* out = rows.ptr<std::uint8_t>(y);
    for (int x = 0; x < out_w; ++x) {
      const std::int32_t* k = &h.weights[static_cast<std::size_t>(x) * h.width];
      const std::uint8_t* px = in + 3 * h.start[x];
      std::int32_t acc[3] = {1 << (kPrecisionBits - 1), 1 << (kPrecisionBits - 1), 1 << (kPrecisionBits - 1)};
      for (int t = 0; t < h.count[x]; ++t, px += 3)
        for (int c = 0; c < 3; ++c) acc[c] += px[c] * k[t];
      for (int c = 0; c < 3; ++c) out[3 * x + c] = clip8(acc[c]);
    }
  }
}

// Vertical pass: output row y mixes rows v.start[y] - row0 ... of the horizontal result.
void resample_columns(const cv::Mat& rows, int row0, const Taps& v, cv::Mat& out) {
  const int n = rows.cols * 3;
  thread_local std::vector<std::int32_t> acc;
  acc.resize(n);
  for (int y = 0; y < out.rows; ++y) {
    const std::int32_t* k = &v.weights[static_cast<std::size_t>(y) * v.width];
    std::fill(acc.begin(), acc.end(), 1 << (kPrecisionBits - 1));
    for (int t = 0; t < v.count[y]; ++t) {
      const std::uint8_t* src = rows.ptr<std::uint8_t>(v.start[y] - row0 + t);
      for (int i = 0; i < n; ++i) acc[i] += src[i] * k[t];
    }
    std::uint8_t* dst = out.ptr<std::uint8_t>(y);
    for (int i = 0; i < n; ++i) dst[i] = clip8(acc[i]);
  }
}

// Python's round(x / 2) for an integer x: halves go to the even neighbour.
int half_rounded_to_even(int x) {
  const int down = x >= 0 ? x / 2 : -((-x + 1) / 2);
  if (x % 2 == 0) return down;
  return down % 2 == 0 ? down : down + 1;
}

}  // namespace

int eval_resize_short_side(int crop, double crop_pct) {
  if (!(crop_pct > 0.0 && crop_pct <= 1.0))
    throw ConfigError("augment.eval_crop_pct must be in (0, 1], got " + std::to_string(crop_pct));
  return static_cast<int>(std::floor(crop / crop_pct));
}

EvalCropPlan plan_eval_crop(int width, int height, int resize_short_side, int crop) {
  if (crop < 1 || resize_short_side < crop)
    throw ConfigError("eval transform: crop " + std::to_string(crop) +
                      " must be between 1 and the resized short side " + std::to_string(resize_short_side));
  if (width < 1 || height < 1) throw DataError("eval transform: empty image");
  EvalCropPlan p;
  p.crop = crop;
  const bool wide = width >= height;
  const int long_side =
      static_cast<int>(static_cast<double>(resize_short_side) * (wide ? width : height) / (wide ? height : width));
  p.resized_width = wide ? long_side : resize_short_side;
  p.resized_height = wide ? resize_short_side : long_side;
  p.left = half_rounded_to_even(p.resized_width - crop);
  p.top = half_rounded_to_even(p.resized_height - crop);
  return p;
}

void resize_and_center_crop(const cv::Mat& rgb, int resize_short_side, int crop, cv::Mat& out) {
  if (rgb.empty() || rgb.type() != CV_8UC3) throw DataError("eval transform: expected a non-empty 8-bit RGB image");
  const EvalCropPlan plan = plan_eval_crop(rgb.cols, rgb.rows, resize_short_side, crop);
  const Taps h = taps_for(rgb.cols, plan.resized_width, plan.left, crop);
  const Taps v = taps_for(rgb.rows, plan.resized_height, plan.top, crop);
  const int row0 = v.start.front();
  const int row_end = v.start.back() + v.count.back();
  thread_local cv::Mat rows;  // the horizontal pass's rows: reused, so steady state allocates nothing
  rows.create(row_end - row0, crop, CV_8UC3);
  resample_rows(rgb, row0, h, rows);
  out.create(crop, crop, CV_8UC3);
  resample_columns(rows, row0, v, out);
}

}  // namespace shoplens
