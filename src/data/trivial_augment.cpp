#include "trivial_augment.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

namespace shoplens::detail {
namespace {

constexpr double kPi = 3.14159265358979323846;

// torchvision's linspace(lo, hi, 31)[bin].
double bin_value(double lo, double hi, int bin) { return lo + (hi - lo) * bin / (kTrivialBins - 1); }

bool is_signed(TrivialOp op) {
  switch (op) {
    case TrivialOp::kShearX:
    case TrivialOp::kShearY:
    case TrivialOp::kTranslateX:
    case TrivialOp::kTranslateY:
    case TrivialOp::kRotate:
    case TrivialOp::kBrightness:
    case TrivialOp::kColor:
    case TrivialOp::kContrast:
    case TrivialOp::kSharpness:
      return true;
    default:
      return false;
  }
}

bool has_magnitude(TrivialOp op) {
  return op != TrivialOp::kIdentity && op != TrivialOp::kAutoContrast && op != TrivialOp::kEqualize;
}

std::uint8_t to_u8(double v) {
  return static_cast<std::uint8_t>(std::clamp(v, 0.0, 255.0));
}  // truncates, as .to(uint8)

// ---- geometry: nearest neighbour through an inverse affine map, black outside ----------------

// Input position of an output pixel centre, both relative to `centre` (torchvision's convention:
// F.affine's centre, pixel centres at +0.5).
struct InverseAffine {
  double m[6];
  double cx, cy;
};

void warp_nearest(const cv::Mat& src, cv::Mat& dst, const InverseAffine& t) {
  dst.create(src.rows, src.cols, CV_8UC3);
  for (int y = 0; y < src.rows; ++y) {
    std::uint8_t* out = dst.ptr<std::uint8_t>(y);
    const double yc = y + 0.5 - t.cy;
    for (int x = 0; x < src.cols; ++x) {
      const double xc = x + 0.5 - t.cx;
      const int sx = static_cast<int>(std::nearbyint(t.m[0] * xc + t.m[1] * yc + t.m[2] + t.cx - 0.5));
      const int sy = static_cast<int>(std::nearbyint(t.m[3] * xc + t.m[4] * yc + t.m[5] + t.cy - 0.5));
      const bool inside = sx >= 0 && sx < src.cols && sy >= 0 && sy < src.rows;
      const std::uint8_t* in = inside ? src.ptr<std::uint8_t>(sy) + 3 * sx : nullptr;
      for (int c = 0; c < 3; ++c) out[3 * x + c] = inside ? in[c] : 0;
    }
  }
}

// The inverse maps of torchvision's _apply_op: shears about the top-left corner (centre=[0, 0]),
// translations by whole pixels, rotation about the image centre.
InverseAffine inverse_map(TrivialOp op, double m, int width, int height) {
  const double w2 = width / 2.0, h2 = height / 2.0;
  switch (op) {
    case TrivialOp::kShearX:
      return {{1, m, 0, 0, 1, 0}, 0, 0};
    case TrivialOp::kShearY:
      return {{1, 0, 0, m, 1, 0}, 0, 0};
    case TrivialOp::kTranslateX:
      return {{1, 0, -std::trunc(m), 0, 1, 0}, w2, h2};
    case TrivialOp::kTranslateY:
      return {{1, 0, 0, 0, 1, -std::trunc(m)}, w2, h2};
    default: {  // rotate by m degrees counter-clockwise
      const double r = -m * kPi / 180.0;
      return {{std::cos(r), std::sin(r), 0, -std::sin(r), std::cos(r), 0}, w2, h2};
    }
  }
}

// ---- colour, with torchvision's uint8 tensor arithmetic --------------------------------------

std::uint8_t gray_u8(const std::uint8_t* p) { return to_u8(0.2989 * p[0] + 0.587 * p[1] + 0.114 * p[2]); }

// _blend(img, other, f) = (f * img + (1 - f) * other).clamp(0, 255), per pixel; `other` gives the
// blend partner of channel c of the pixel at p.
template <class Partner>
void blend(cv::Mat& rgb, double f, Partner other) {
  for (int y = 0; y < rgb.rows; ++y) {
    std::uint8_t* p = rgb.ptr<std::uint8_t>(y);
    for (int x = 0; x < rgb.cols; ++x, p += 3) {
      const double o[3] = {other(p, y, x, 0), other(p, y, x, 1), other(p, y, x, 2)};
      for (int c = 0; c < 3; ++c) p[c] = to_u8(f * p[c] + (1.0 - f) * o[c]);
    }
  }
}

double mean_gray(const cv::Mat& rgb) {
  double sum = 0;
  for (int y = 0; y < rgb.rows; ++y) {
    const std::uint8_t* p = rgb.ptr<std::uint8_t>(y);
    for (int x = 0; x < rgb.cols; ++x) sum += gray_u8(p + 3 * x);
  }
  return sum / (static_cast<double>(rgb.rows) * rgb.cols);
}

// adjust_sharpness: blend with the image smoothed by [[1,1,1],[1,5,1],[1,1,1]]/13 (rounded),
// whose border pixels are the originals.
void sharpness(cv::Mat& rgb, double f, cv::Mat& smooth) {
  if (rgb.rows <= 2 || rgb.cols <= 2) return;
  rgb.copyTo(smooth);
  for (int y = 1; y + 1 < rgb.rows; ++y)
    for (int x = 1; x + 1 < rgb.cols; ++x)
      for (int c = 0; c < 3; ++c) {
        int sum = 4 * rgb.ptr<std::uint8_t>(y)[3 * x + c];
        for (int dy = -1; dy <= 1; ++dy)
          for (int dx = -1; dx <= 1; ++dx) sum += rgb.ptr<std::uint8_t>(y + dy)[3 * (x + dx) + c];
        smooth.ptr<std::uint8_t>(y)[3 * x + c] = static_cast<std::uint8_t>(std::nearbyint(sum / 13.0));
      }
  blend(rgb, f,
        [&](const std::uint8_t*, int y, int x, int c) { return double(smooth.ptr<std::uint8_t>(y)[3 * x + c]); });
}

// A 256-entry table per channel, applied in one pass.
using ChannelTables = std::array<std::array<std::uint8_t, 256>, 3>;

void apply_tables(cv::Mat& rgb, const ChannelTables& lut) {
  for (int y = 0; y < rgb.rows; ++y) {
    std::uint8_t* p = rgb.ptr<std::uint8_t>(y);
    for (int x = 0; x < rgb.cols; ++x, p += 3)
      for (int c = 0; c < 3; ++c) p[c] = lut[c][p[c]];
  }
}

std::array<std::array<std::int64_t, 256>, 3> histograms(const cv::Mat& rgb) {
  std::array<std::array<std::int64_t, 256>, 3> hist{};
  for (int y = 0; y < rgb.rows; ++y) {
    const std::uint8_t* p = rgb.ptr<std::uint8_t>(y);
    for (int x = 0; x < rgb.cols; ++x, p += 3)
      for (int c = 0; c < 3; ++c) hist[c][p[c]]++;
  }
  return hist;
}

// autocontrast: each channel stretched to [0, 255]; a flat channel stays as it is.
ChannelTables autocontrast_tables(const cv::Mat& rgb) {
  const auto hist = histograms(rgb);
  ChannelTables lut{};
  for (int c = 0; c < 3; ++c) {
    int lo = 0, hi = 255;
    while (lo < 255 && hist[c][lo] == 0) ++lo;
    while (hi > 0 && hist[c][hi] == 0) --hi;
    const double scale = hi > lo ? 255.0 / (hi - lo) : 1.0;
    for (int v = 0; v < 256; ++v) lut[c][v] = hi > lo ? to_u8((v - lo) * scale) : static_cast<std::uint8_t>(v);
  }
  return lut;
}

// equalize (torchvision's _equalize_single_image): step = (pixels - count of the last used
// level) // 255; a channel with step 0 stays; else lut[v] = (cumsum[v - 1] + step // 2) // step.
ChannelTables equalize_tables(const cv::Mat& rgb) {
  const auto hist = histograms(rgb);
  ChannelTables lut{};
  for (int c = 0; c < 3; ++c) {
    std::int64_t total = 0, last = 0;
    for (int v = 0; v < 256; ++v) {
      total += hist[c][v];
      if (hist[c][v] > 0) last = hist[c][v];
    }
    const std::int64_t step = (total - last) / 255;
    std::int64_t below = 0;  // pixels under level v
    for (int v = 0; v < 256; ++v) {
      lut[c][v] = step == 0 ? static_cast<std::uint8_t>(v)
                            : static_cast<std::uint8_t>(std::min<std::int64_t>(255, (below + step / 2) / step));
      below += hist[c][v];
    }
  }
  return lut;
}

ChannelTables pointwise_tables(TrivialOp op, double magnitude) {
  ChannelTables lut{};
  // Posterize keeps `magnitude` bits; for Solarize the magnitude is a pixel threshold (up to 255),
  // and a shift by 8 minus it would be undefined.
  const int bits = std::clamp(static_cast<int>(magnitude), 0, 8);
  const auto mask = static_cast<std::uint8_t>(0xFF << (8 - bits));
  for (int v = 0; v < 256; ++v) {
    const auto out = op == TrivialOp::kPosterize ? static_cast<std::uint8_t>(v & mask)
                                                 : static_cast<std::uint8_t>(v >= magnitude ? 255 - v : v);
    for (int c = 0; c < 3; ++c) lut[c][v] = out;
  }
  return lut;
}

}  // namespace

double trivial_magnitude(TrivialOp op, int bin) {
  switch (op) {
    case TrivialOp::kShearX:
    case TrivialOp::kShearY:
    case TrivialOp::kBrightness:
    case TrivialOp::kColor:
    case TrivialOp::kContrast:
    case TrivialOp::kSharpness:
      return bin_value(0.0, 0.99, bin);
    case TrivialOp::kTranslateX:
    case TrivialOp::kTranslateY:
      return bin_value(0.0, 32.0, bin);
    case TrivialOp::kRotate:
      return bin_value(0.0, 135.0, bin);
    case TrivialOp::kPosterize:
      return 8 - std::nearbyint(bin / ((kTrivialBins - 1) / 6.0));
    case TrivialOp::kSolarize:
      return bin_value(255.0, 0.0, bin);
    default:
      return 0.0;
  }
}

const char* trivial_op_name(TrivialOp op) {
  static constexpr const char* kNames[kTrivialOps] = {
      "Identity", "ShearX",   "ShearY",    "TranslateX", "TranslateY", "Rotate",       "Brightness",
      "Color",    "Contrast", "Sharpness", "Posterize",  "Solarize",   "AutoContrast", "Equalize"};
  return kNames[static_cast<int>(op)];
}

TrivialChoice draw_trivial_augment(Rng& rng) {
  TrivialChoice choice;
  choice.op = static_cast<TrivialOp>(rng.uniform_int(kTrivialOps));
  if (!has_magnitude(choice.op)) return choice;
  choice.magnitude = trivial_magnitude(choice.op, rng.uniform_int(kTrivialBins));
  if (is_signed(choice.op) && rng.bernoulli(0.5)) choice.magnitude = -choice.magnitude;
  return choice;
}

void apply_trivial_op(cv::Mat& rgb, const TrivialChoice& choice, cv::Mat& scratch) {
  const double m = choice.magnitude;
  switch (choice.op) {
    case TrivialOp::kIdentity:
      return;
    case TrivialOp::kShearX:
    case TrivialOp::kShearY:
    case TrivialOp::kTranslateX:
    case TrivialOp::kTranslateY:
    case TrivialOp::kRotate:
      warp_nearest(rgb, scratch, inverse_map(choice.op, m, rgb.cols, rgb.rows));
      std::swap(rgb, scratch);
      return;
    case TrivialOp::kBrightness:
      return blend(rgb, 1.0 + m, [](const std::uint8_t*, int, int, int) { return 0.0; });
    case TrivialOp::kColor:
      return blend(rgb, 1.0 + m, [](const std::uint8_t* p, int, int, int) { return double(gray_u8(p)); });
    case TrivialOp::kContrast: {
      const double mean = mean_gray(rgb);
      return blend(rgb, 1.0 + m, [mean](const std::uint8_t*, int, int, int) { return mean; });
    }
    case TrivialOp::kSharpness:
      return sharpness(rgb, 1.0 + m, scratch);
    case TrivialOp::kPosterize:
    case TrivialOp::kSolarize:
      return apply_tables(rgb, pointwise_tables(choice.op, m));
    case TrivialOp::kAutoContrast:
      return apply_tables(rgb, autocontrast_tables(rgb));
    case TrivialOp::kEqualize:
      return apply_tables(rgb, equalize_tables(rgb));
  }
}

}  // namespace shoplens::detail
