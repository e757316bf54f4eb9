// Product renderings for the synthetic catalog: eight product kinds drawn from simple shapes
// with random colours, surface textures, cylinder shading and a specular highlight, on a studio
// sweep (or a busy background), with a soft floor shadow. Everything is drawn at the final size
// with OpenCV's anti-aliased primitives, so a 640-pixel image costs about a millisecond.
#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include <opencv2/imgproc.hpp>

#include "synth_internal.h"

namespace shoplens::synth {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr int kShift = 4;  // sub-pixel bits for the anti-aliased primitives
constexpr double kSub = 1 << kShift;

cv::Vec3b hsv_to_bgr(double hue_degrees, double s, double v) {
  const double h = std::fmod(std::fmod(hue_degrees, 360.0) + 360.0, 360.0) / 60.0;
  const double c = v * s;
  const double x = c * (1 - std::fabs(std::fmod(h, 2.0) - 1));
  double r = 0, g = 0, b = 0;
  switch (static_cast<int>(h)) {
    case 0:
      r = c, g = x;
      break;
    case 1:
      r = x, g = c;
      break;
    case 2:
      g = c, b = x;
      break;
    case 3:
      g = x, b = c;
      break;
    case 4:
      r = x, b = c;
      break;
    default:
      r = c, b = x;
      break;
  }
  const double m = v - c;
  return {cv::saturate_cast<uchar>((b + m) * 255), cv::saturate_cast<uchar>((g + m) * 255),
          cv::saturate_cast<uchar>((r + m) * 255)};
}

cv::Vec3b random_color(Rng& rng, double min_value = 0.12, double max_value = 0.95) {
  return hsv_to_bgr(rng.uniform(0, 360), rng.uniform() < 0.2 ? rng.uniform(0, 0.15) : rng.uniform(0.25, 1.0),
                    rng.uniform(min_value, max_value));
}

cv::Vec3b neutral(Rng& rng) {
  const int level = rng.bernoulli(0.5) ? rng.uniform_int(10, 70) : rng.uniform_int(200, 250);
  return {static_cast<uchar>(level), static_cast<uchar>(level), static_cast<uchar>(level)};
}

cv::Vec3b scaled(const cv::Vec3b& c, double f) {
  return {cv::saturate_cast<uchar>(c[0] * f), cv::saturate_cast<uchar>(c[1] * f), cv::saturate_cast<uchar>(c[2] * f)};
}

cv::Vec3b mix(const cv::Vec3b& a, const cv::Vec3b& b, double t) {
  return {cv::saturate_cast<uchar>(a[0] + (b[0] - a[0]) * t), cv::saturate_cast<uchar>(a[1] + (b[1] - a[1]) * t),
          cv::saturate_cast<uchar>(a[2] + (b[2] - a[2]) * t)};
}

cv::Scalar scalar(const cv::Vec3b& c) { return {double(c[0]), double(c[1]), double(c[2])}; }

enum class Texture { kNone, kStripes, kDots, kChecks, kWeave };

struct Look {
  ProductKind kind;
  cv::Vec3b primary, secondary, accent;
  Texture texture = Texture::kNone;
  double texture_period = 0.1;  // fraction of the product's width
  double texture_angle = 0;     // degrees
  double shading = 0.3;         // darkening at the left/right edges (a lit cylinder)
  double vertical_falloff = 0.1;
  double highlight = 0.2;  // specular stripe strength
  double highlight_pos = 0.3;
  bool brand = false;
  int brand_index = 0;
};

const std::array<const char*, 8> kBrands = {"AURA", "NOVA", "KIVO", "LUMA", "ORBIT", "PIKA", "ZENO", "MIRA"};

Texture random_texture(ProductKind kind, Rng& rng) {
  const auto& weights = product_kind_facts(kind).texture_weights;
  if (std::all_of(weights.begin(), weights.end(), [](double w) { return w == 0; })) return Texture::kNone;
  return static_cast<Texture>(rng.pick(weights));
}

Look random_look(ProductKind kind, Rng& rng) {
  Look look;
  look.kind = kind;
  look.primary = kind == ProductKind::kPhone && rng.bernoulli(0.6) ? scaled(neutral(rng), 0.5) : random_color(rng);
  look.secondary = rng.bernoulli(0.5) ? neutral(rng) : random_color(rng);
  look.accent = random_color(rng, 0.3, 1.0);
  look.texture = random_texture(kind, rng);
  look.texture_period = rng.uniform(0.05, 0.16);
  look.texture_angle = rng.pick({0.45, 0.35, 0.2}) * 45.0 * (rng.bernoulli(0.5) ? 1 : -1);
  const bool flat = product_kind_facts(kind).flat;
  look.shading = flat ? rng.uniform(0.02, 0.12) : rng.uniform(0.2, 0.45);
  look.vertical_falloff = rng.uniform(0.0, 0.2);
  look.highlight = flat ? 0.0 : rng.uniform(0.05, 0.35);
  look.highlight_pos = rng.uniform(0.2, 0.4);
  look.brand = product_kind_facts(kind).takes_brand && rng.bernoulli(0.45);
  look.brand_index = rng.uniform_int(0, static_cast<int>(kBrands.size()) - 1);
  return look;
}

// Height over width of the product's bounding box.
double product_aspect(ProductKind kind, Rng& rng) {
  const ProductKindFacts& facts = product_kind_facts(kind);
  return rng.uniform(facts.aspect_min, facts.aspect_max);
}

// A product drawn in its own box: colour plus coverage (alpha).
struct Sprite {
  cv::Mat3b color;
  cv::Mat1b mask;
};

// Draws shapes given in the box's unit coordinates (u right, v down). Parts set coverage;
// details only repaint what a part already covers.
class Painter {
 public:
  Painter(cv::Size size, const cv::Vec3b& fill) : color_(size, fill), mask_(size, uchar(0)) {}

  cv::Point at(double u, double v) const {
    return {cvRound(u * (color_.cols - 1) * kSub), cvRound(v * (color_.rows - 1) * kSub)};
  }
  cv::Size axes(double au, double av) const {
    return {std::max(1, cvRound(au * (color_.cols - 1) * kSub)), std::max(1, cvRound(av * (color_.rows - 1) * kSub))};
  }
  int px(double fraction_of_width) const { return std::max(1, cvRound(fraction_of_width * color_.cols)); }
  int width() const { return color_.cols; }
  int height() const { return color_.rows; }

  void part(const std::vector<cv::Point2d>& uv, const cv::Vec3b& c) { fill(uv, c, true); }
  void detail(const std::vector<cv::Point2d>& uv, const cv::Vec3b& c) { fill(uv, c, false); }
  void part_rect(double u0, double v0, double u1, double v1, const cv::Vec3b& c) {
    part({{u0, v0}, {u1, v0}, {u1, v1}, {u0, v1}}, c);
  }
  void detail_rect(double u0, double v0, double u1, double v1, const cv::Vec3b& c) {
    detail({{u0, v0}, {u1, v0}, {u1, v1}, {u0, v1}}, c);
  }
  // thickness < 0 fills; angles in degrees as cv::ellipse.
  void part_ellipse(double cu, double cv_, double au, double av, const cv::Vec3b& c, int thickness = -1,
                    double start = 0, double end = 360) {
    cv::ellipse(color_, at(cu, cv_), axes(au, av), 0, start, end, scalar(c), thickness, cv::LINE_AA, kShift);
    cv::ellipse(mask_, at(cu, cv_), axes(au, av), 0, start, end, cv::Scalar(255), thickness, cv::LINE_AA, kShift);
  }
  void detail_ellipse(double cu, double cv_, double au, double av, const cv::Vec3b& c, int thickness = -1,
                      double start = 0, double end = 360) {
    cv::ellipse(color_, at(cu, cv_), axes(au, av), 0, start, end, scalar(c), thickness, cv::LINE_AA, kShift);
  }
  void cut_ellipse(double cu, double cv_, double au, double av) {
    cv::ellipse(mask_, at(cu, cv_), axes(au, av), 0, 0, 360, cv::Scalar(0), -1, cv::LINE_AA, kShift);
  }
  void detail_line(double u0, double v0, double u1, double v1, const cv::Vec3b& c, int thickness) {
    cv::line(color_, at(u0, v0), at(u1, v1), scalar(c), thickness, cv::LINE_AA, kShift);
  }
  void part_rounded_rect(double u0, double v0, double u1, double v1, double radius_u, const cv::Vec3b& c) {
    const double ru = radius_u, rv = radius_u * color_.cols / std::max(1, color_.rows);
    part_rect(u0 + ru, v0, u1 - ru, v1, c);
    part_rect(u0, v0 + rv, u1, v1 - rv, c);
    for (double cu : {u0 + ru, u1 - ru})
      for (double cvv : {v0 + rv, v1 - rv}) part_ellipse(cu, cvv, ru, rv, c);
  }
  void text(const std::string& s, double cu, double cv_, double width_u, const cv::Vec3b& c) {
    const int thickness = std::max(1, color_.cols / 90);
    int baseline = 0;
    const cv::Size unit = cv::getTextSize(s, cv::FONT_HERSHEY_DUPLEX, 1.0, thickness, &baseline);
    const double scale = width_u * color_.cols / std::max(1, unit.width);
    if (scale * unit.height < 4) return;  // too small to be more than noise
    const cv::Point origin(cvRound(cu * color_.cols - scale * unit.width / 2),
                           cvRound(cv_ * color_.rows + scale * unit.height / 2));
    cv::putText(color_, s, origin, cv::FONT_HERSHEY_DUPLEX, scale, scalar(c), thickness, cv::LINE_AA);
  }

  cv::Mat3b& color() { return color_; }
  Sprite take() { return {color_, mask_}; }

 private:
  void fill(const std::vector<cv::Point2d>& uv, const cv::Vec3b& c, bool coverage) {
    std::vector<cv::Point> pts;
    pts.reserve(uv.size());
    for (const auto& p : uv) pts.push_back(at(p.x, p.y));
    const cv::Point* data = pts.data();
    const int n = static_cast<int>(pts.size());
    cv::fillPoly(color_, &data, &n, 1, scalar(c), cv::LINE_AA, kShift);
    if (coverage) cv::fillPoly(mask_, &data, &n, 1, cv::Scalar(255), cv::LINE_AA, kShift);
  }

  cv::Mat3b color_;
  cv::Mat1b mask_;
};

void draw_texture(Painter& p, const Look& look) {
  if (look.texture == Texture::kNone || look.texture == Texture::kWeave) return;  // weave is shaded in
  const double period = std::max(3.0, look.texture_period * p.width());
  const cv::Scalar accent = scalar(look.accent);
  const int w = p.width(), h = p.height();
  cv::Mat3b& img = p.color();
  if (look.texture == Texture::kStripes) {
    // Lines across the box at texture_angle from horizontal.
    const double a = look.texture_angle * kPi / 180.0;
    const cv::Point2d dir(std::cos(a), std::sin(a)), normal(-dir.y, dir.x);
    const double reach = std::hypot(w, h);
    const cv::Point2d centre(w / 2.0, h / 2.0);
    const int thickness = std::max(1, cvRound(period * 0.4));
    for (double t = -reach; t <= reach; t += period) {
      const cv::Point2d c = centre + normal * t;
      cv::line(img, (c - dir * reach) * kSub, (c + dir * reach) * kSub, accent, thickness, cv::LINE_AA, kShift);
    }
  } else if (look.texture == Texture::kDots) {
    const int radius = std::max(1, cvRound(period * 0.22 * kSub));
    for (double y = period / 2; y < h; y += period)
      for (double x = period / 2 + (static_cast<int>(y / period) % 2) * period / 2; x < w; x += period)
        cv::circle(img, cv::Point2d(x, y) * kSub, radius, accent, -1, cv::LINE_AA, kShift);
  } else {
    const cv::Scalar half = scalar(mix(look.primary, look.accent, 0.5));
    for (int j = 0; j * period < h; ++j)
      for (int i = j % 2; i * period < w; i += 2)
        cv::rectangle(img, cv::Rect(cvRound(i * period), cvRound(j * period), cvRound(period), cvRound(period)), half,
                      -1);
  }
}

void paint_bottle(Painter& p, const Look& look) {
  p.part_rounded_rect(0.04, 0.36, 0.96, 1.0, 0.12, look.primary);
  p.part_ellipse(0.5, 0.38, 0.46, 0.13, look.primary);
  p.part_rect(0.34, 0.09, 0.66, 0.4, look.primary);
  draw_texture(p, look);
  p.part_rect(0.3, 0.0, 0.7, 0.12, look.secondary);
  if (look.brand) {
    p.detail_rect(0.04, 0.52, 0.96, 0.8, look.secondary);
    p.text(kBrands[look.brand_index], 0.5, 0.66, 0.7, look.accent);
  }
}

void paint_box(Painter& p, const Look& look) {
  p.part_rect(0.0, 0.22, 0.78, 1.0, look.primary);
  p.part({{0.0, 0.22}, {0.22, 0.0}, {1.0, 0.0}, {0.78, 0.22}}, scaled(look.primary, 1.25));
  p.part({{0.78, 0.22}, {1.0, 0.0}, {1.0, 0.78}, {0.78, 1.0}}, scaled(look.primary, 0.7));
  draw_texture(p, look);
  p.detail_rect(0.08, 0.48, 0.7, 0.64, look.accent);
  if (look.brand) p.text(kBrands[look.brand_index], 0.39, 0.35, 0.5, look.secondary);
}

void paint_shoe(Painter& p, const Look& look) {
  p.part({{0.02, 0.82},
          {0.04, 0.5},
          {0.28, 0.42},
          {0.42, 0.1},
          {0.62, 0.02},
          {0.74, 0.05},
          {0.78, 0.35},
          {0.97, 0.58},
          {1.0, 0.82}},
         look.primary);
  draw_texture(p, look);
  p.part_rounded_rect(0.0, 0.78, 1.0, 1.0, 0.04, look.secondary);
  p.detail_ellipse(0.88, 0.68, 0.11, 0.12, scaled(look.primary, 0.75));
  const int lace = std::max(1, p.width() / 80);
  for (int i = 0; i < 4; ++i) {
    const double t = 0.2 + 0.12 * i;
    p.detail_line(0.46 + 0.08 * i, t, 0.6 + 0.08 * i, t - 0.06, look.accent, lace);
  }
}

void paint_shirt(Painter& p, const Look& look) {
  p.part({{0.27, 0.04},
          {0.4, 0.0},
          {0.6, 0.0},
          {0.73, 0.04},
          {1.0, 0.24},
          {0.9, 0.42},
          {0.78, 0.34},
          {0.78, 1.0},
          {0.22, 1.0},
          {0.22, 0.34},
          {0.1, 0.42},
          {0.0, 0.24}},
         look.primary);
  draw_texture(p, look);
  p.cut_ellipse(0.5, 0.0, 0.11, 0.07);
  p.detail_ellipse(0.5, 0.0, 0.12, 0.085, look.secondary, std::max(2, p.width() / 40), 0, 180);
  p.detail_line(0.22, 0.96, 0.78, 0.96, scaled(look.primary, 0.8), std::max(1, p.width() / 100));
}

void paint_mug(Painter& p, const Look& look) {
  p.part_ellipse(0.8, 0.52, 0.16, 0.22, look.primary, p.px(0.06));
  p.part_rounded_rect(0.03, 0.08, 0.8, 1.0, 0.06, look.primary);
  p.part_ellipse(0.415, 0.08, 0.385, 0.06, scaled(look.primary, 1.15));
  draw_texture(p, look);
  p.detail_ellipse(0.415, 0.085, 0.35, 0.045, scaled(look.primary, 0.35));
  if (look.brand) p.text(kBrands[look.brand_index], 0.42, 0.55, 0.55, look.accent);
}

void paint_phone(Painter& p, const Look& look) {
  p.part_rounded_rect(0.0, 0.0, 1.0, 1.0, 0.12, look.primary);
  const cv::Vec3b screen = scaled(look.secondary, 0.3);
  p.detail_rect(0.06, 0.05, 0.94, 0.95, screen);
  p.detail({{0.06, 0.6}, {0.94, 0.3}, {0.94, 0.95}, {0.06, 0.95}}, mix(screen, look.accent, 0.7));
  p.detail_ellipse(0.5, 0.025, 0.03, 0.012, scaled(look.primary, 0.4));
}

void paint_lamp(Painter& p, const Look& look) {
  p.part({{0.2, 0.0}, {0.8, 0.0}, {1.0, 0.42}, {0.0, 0.42}}, look.primary);
  draw_texture(p, look);
  p.part_rect(0.46, 0.41, 0.54, 0.93, look.secondary);
  p.part_ellipse(0.5, 0.94, 0.36, 0.06, look.secondary);
  p.detail_line(0.0, 0.415, 1.0, 0.415, look.accent, std::max(1, p.width() / 60));
}

void paint_bag(Painter& p, const Look& look) {
  p.part_ellipse(0.5, 0.34, 0.26, 0.3, look.secondary, p.px(0.05), 180, 360);
  p.part({{0.08, 0.3}, {0.92, 0.3}, {1.0, 1.0}, {0.0, 1.0}}, look.primary);
  draw_texture(p, look);
  p.detail({{0.08, 0.3}, {0.92, 0.3}, {0.8, 0.55}, {0.2, 0.55}}, scaled(look.primary, 0.75));
  p.detail_rect(0.46, 0.5, 0.54, 0.58, look.accent);
  if (look.brand) p.text(kBrands[look.brand_index], 0.5, 0.78, 0.45, look.accent);
}

// Light falls from the upper left: darker edges across (a cylinder), a soft specular stripe,
// a little falloff towards the bottom, and for weave a fine fabric modulation.
void shade(Sprite& s, const Look& look, Rng& rng) {
  const int w = s.color.cols, h = s.color.rows;
  std::vector<float> fx(w), hl(w), wx(w), wy(h), fy(h);
  const double weave_period = rng.uniform(3.0, 6.0), weave_amp = look.texture == Texture::kWeave ? 0.08 : 0.0;
  for (int x = 0; x < w; ++x) {
    const double u = (x + 0.5) / w, d = 2 * u - 1;
    fx[x] = static_cast<float>(1 - look.shading * d * d);
    const double z = (u - look.highlight_pos) / 0.07;
    hl[x] = static_cast<float>(look.highlight * std::exp(-z * z));
    wx[x] = static_cast<float>(weave_amp * std::sin(2 * kPi * x / weave_period));
  }
  for (int y = 0; y < h; ++y) {
    fy[y] = static_cast<float>(1 - look.vertical_falloff * (y + 0.5) / h);
    wy[y] = static_cast<float>(std::sin(2 * kPi * y / weave_period));
  }
  for (int y = 0; y < h; ++y) {
    cv::Vec3b* row = s.color.ptr<cv::Vec3b>(y);
    const uchar* m = s.mask.ptr<uchar>(y);
    for (int x = 0; x < w; ++x) {
      if (!m[x]) continue;
      const float f = fx[x] * fy[y] * (1 + wx[x] * wy[y]);
      for (int c = 0; c < 3; ++c) {
        const float v = row[x][c] * f;
        row[x][c] = cv::saturate_cast<uchar>(v + hl[x] * (255 - v));
      }
    }
  }
}

Sprite make_sprite(const Look& look, cv::Size size, Rng& rng) {
  Painter p(size, look.primary);
  switch (look.kind) {
    case ProductKind::kBottle:
      paint_bottle(p, look);
      break;
    case ProductKind::kBox:
      paint_box(p, look);
      break;
    case ProductKind::kShoe:
      paint_shoe(p, look);
      break;
    case ProductKind::kShirt:
      paint_shirt(p, look);
      break;
    case ProductKind::kMug:
      paint_mug(p, look);
      break;
    case ProductKind::kPhone:
      paint_phone(p, look);
      break;
    case ProductKind::kLamp:
      paint_lamp(p, look);
      break;
    case ProductKind::kBag:
      paint_bag(p, look);
      break;
  }
  Sprite s = p.take();
  shade(s, look, rng);
  return s;
}

// Alpha-blends the sprite at `origin`; parts outside the frame are simply cut off.
void composite(cv::Mat3b& canvas, const Sprite& s, cv::Point origin) {
  const cv::Rect dst = cv::Rect(origin, s.color.size()) & cv::Rect(0, 0, canvas.cols, canvas.rows);
  for (int y = dst.y; y < dst.y + dst.height; ++y) {
    cv::Vec3b* out = canvas.ptr<cv::Vec3b>(y);
    const cv::Vec3b* src = s.color.ptr<cv::Vec3b>(y - origin.y);
    const uchar* m = s.mask.ptr<uchar>(y - origin.y);
    for (int x = dst.x; x < dst.x + dst.width; ++x) {
      const int a = m[x - origin.x];
      if (a == 0) continue;
      const cv::Vec3b& c = src[x - origin.x];
      if (a == 255) {
        out[x] = c;
        continue;
      }
      for (int k = 0; k < 3; ++k) out[x][k] = static_cast<uchar>((out[x][k] * (255 - a) + c[k] * a + 127) / 255);
    }
  }
}

// A soft contact shadow on the floor under the product, drawn small and upscaled (a cheap blur).
void floor_shadow(cv::Mat3b& canvas, const cv::Rect2d& box, Rng& rng) {
  const double cx = box.x + box.width * rng.uniform(0.45, 0.6), cy = box.y + box.height * 0.985;
  const double ax = box.width * rng.uniform(0.45, 0.6), ay = std::max(2.0, box.height * rng.uniform(0.04, 0.08));
  const double strength = rng.uniform(0.15, 0.4);
  const cv::Rect region = cv::Rect(cvFloor(cx - ax * 1.5), cvFloor(cy - ay * 3), cvCeil(ax * 3), cvCeil(ay * 6)) &
                          cv::Rect(0, 0, canvas.cols, canvas.rows);
  if (region.width < 4 || region.height < 4) return;
  constexpr int kDown = 4;
  cv::Mat1b small((region.height + kDown - 1) / kDown, (region.width + kDown - 1) / kDown, uchar(0));
  cv::ellipse(small, cv::Point2d((cx - region.x) / kDown, (cy - region.y) / kDown) * kSub,
              cv::Size(cvRound(ax / kDown * kSub), cvRound(ay / kDown * kSub)), 0, 0, 360, cv::Scalar(255), -1,
              cv::LINE_AA, kShift);
  cv::GaussianBlur(small, small, cv::Size(0, 0), std::max(1.0, ay / kDown));
  cv::Mat1b shadow;
  cv::resize(small, shadow, region.size(), 0, 0, cv::INTER_LINEAR);
  for (int y = 0; y < region.height; ++y) {
    cv::Vec3b* out = canvas.ptr<cv::Vec3b>(region.y + y) + region.x;
    const uchar* m = shadow.ptr<uchar>(y);
    for (int x = 0; x < region.width; ++x) {
      const float f = 1.0f - static_cast<float>(strength) * m[x] / 255.0f;
      // Non-negative: adding 0.5 and truncating rounds to nearest, without a libm call per pixel.
      for (int k = 0; k < 3; ++k)
        out[x][k] = static_cast<uchar>(out[x][k] * f + 0.5f);  // NOLINT(bugprone-incorrect-roundings)
    }
  }
}

// White to light-grey studio sweep: a vertical gradient with a slight tint and a gentle
// horizontal falloff, as a seamless paper backdrop photographs.
cv::Mat3b studio_background(cv::Size size, Rng& rng) {
  const int top = rng.uniform_int(222, 254), drop = rng.uniform_int(4, 30);
  cv::Vec3d top_c, bottom_c;
  for (int k = 0; k < 3; ++k) {
    const double tint = rng.uniform(-3, 3);
    top_c[k] = std::min(255.0, top + tint);
    bottom_c[k] = std::max(0.0, top - drop + tint);
  }
  // The two end rows, stretched vertically by a linear resize: the gradient at SIMD speed.
  const double falloff = rng.uniform(0, 0.07);
  cv::Mat3b ends(2, size.width);
  for (int x = 0; x < size.width; ++x) {
    const double d = 2.0 * (x + 0.5) / size.width - 1, f = 1 - falloff * d * d;
    for (int k = 0; k < 3; ++k) {
      ends(0, x)[k] = cv::saturate_cast<uchar>(top_c[k] * f);
      ends(1, x)[k] = cv::saturate_cast<uchar>(bottom_c[k] * f);
    }
  }
  cv::Mat3b bg;
  cv::resize(ends, bg, size, 0, 0, cv::INTER_LINEAR);
  return bg;
}

// Random objects behind the product, slightly out of focus (a desk, a shelf, a messy room).
cv::Mat3b clutter_background(cv::Size size, Rng& rng) {
  cv::Mat3b bg(size, random_color(rng, 0.3, 0.95));
  const int long_side = std::max(size.width, size.height);
  const int shapes = rng.uniform_int(18, 45);
  for (int i = 0; i < shapes; ++i) {
    const cv::Scalar c = scalar(random_color(rng, 0.1, 1.0));
    const cv::Point centre(rng.uniform_int(0, size.width - 1), rng.uniform_int(0, size.height - 1));
    const int r = std::max(2, cvRound(long_side * rng.uniform(0.03, 0.2)));
    switch (rng.pick({0.35, 0.35, 0.3})) {
      case 0:
        cv::rectangle(bg, cv::Rect(centre.x - r, centre.y - r / 2, 2 * r, r), c, -1, cv::LINE_AA);
        break;
      case 1:
        cv::circle(bg, centre, r, c, -1, cv::LINE_AA);
        break;
      default:
        cv::line(bg, centre, centre + cv::Point(rng.uniform_int(-3 * r, 3 * r), rng.uniform_int(-3 * r, 3 * r)), c,
                 std::max(1, r / 4), cv::LINE_AA);
    }
  }
  const double sigma = rng.uniform(0.0, 2.0) * long_side / 224.0;
  if (sigma > 0.4) cv::GaussianBlur(bg, bg, cv::Size(0, 0), sigma);
  return bg;
}

// Wallpaper-like repeats: stripes at an angle, checks or a dot grid in two colours.
cv::Mat3b pattern_background(cv::Size size, Rng& rng) {
  const cv::Vec3b a = random_color(rng, 0.3, 1.0), b = rng.bernoulli(0.4) ? neutral(rng) : random_color(rng, 0.2, 1.0);
  const int mode = static_cast<int>(rng.pick({0.45, 0.3, 0.25}));
  const double period = std::max(6.0, std::max(size.width, size.height) * rng.uniform(0.03, 0.12));
  const double angle = rng.uniform(0, kPi);
  const double ca = std::cos(angle), sa = std::sin(angle);
  cv::Mat3b bg(size);
  for (int y = 0; y < size.height; ++y) {
    cv::Vec3b* row = bg.ptr<cv::Vec3b>(y);
    for (int x = 0; x < size.width; ++x) {
      const double s = (x * ca + y * sa) / period, t = (-x * sa + y * ca) / period;
      bool on;
      if (mode == 0) {
        on = static_cast<long>(std::floor(s)) % 2 == 0;
      } else if (mode == 1) {
        on = (static_cast<long>(std::floor(s)) + static_cast<long>(std::floor(t))) % 2 == 0;
      } else {
        const double ds = s - std::floor(s) - 0.5, dt = t - std::floor(t) - 0.5;
        on = ds * ds + dt * dt < 0.09;
      }
      row[x] = on ? a : b;
    }
  }
  return bg;
}

// A room corner: a coloured wall with a framed picture or window, and a plank floor.
cv::Mat3b room_background(cv::Size size, Rng& rng) {
  cv::Mat3b bg(size, random_color(rng, 0.35, 0.95));
  const int horizon = cvRound(size.height * rng.uniform(0.55, 0.8));
  const cv::Vec3b wood = hsv_to_bgr(rng.uniform(20, 40), rng.uniform(0.35, 0.7), rng.uniform(0.3, 0.75));
  cv::rectangle(bg, cv::Rect(0, horizon, size.width, size.height - horizon), scalar(wood), -1);
  const int plank = std::max(4, size.height / rng.uniform_int(10, 20));
  for (int y = horizon + plank; y < size.height; y += plank)
    cv::line(bg, {0, y}, {size.width, y}, scalar(scaled(wood, 0.7)), std::max(1, plank / 8));
  const cv::Rect frame(cvRound(size.width * rng.uniform(0.05, 0.6)), cvRound(horizon * rng.uniform(0.05, 0.3)),
                       cvRound(size.width * rng.uniform(0.2, 0.35)), cvRound(horizon * rng.uniform(0.3, 0.5)));
  cv::rectangle(bg, frame, scalar(random_color(rng)), -1);
  cv::rectangle(bg, frame, scalar(neutral(rng)), std::max(2, size.width / 60));
  if (rng.bernoulli(0.6)) {
    const cv::Point pot(cvRound(size.width * rng.uniform(0.05, 0.95)), horizon);
    const int r = std::max(3, size.height / 10);
    cv::rectangle(bg, cv::Rect(pot.x - r / 2, pot.y - r, r, r), scalar(random_color(rng)), -1);
    for (int i = 0; i < 6; ++i)
      cv::ellipse(bg, pot + cv::Point(rng.uniform_int(-r, r), -r - rng.uniform_int(0, 2 * r)), cv::Size(r / 2, r / 4),
                  rng.uniform(0, 180), 0, 360, scalar(hsv_to_bgr(rng.uniform(90, 150), 0.6, rng.uniform(0.3, 0.7))), -1,
                  cv::LINE_AA);
  }
  return bg;
}

// A saturated colour wash with out-of-focus light blobs (bokeh).
cv::Mat3b colour_background(cv::Size size, Rng& rng) {
  const cv::Vec3b a = hsv_to_bgr(rng.uniform(0, 360), rng.uniform(0.5, 1.0), rng.uniform(0.4, 1.0));
  const cv::Vec3b b = hsv_to_bgr(rng.uniform(0, 360), rng.uniform(0.5, 1.0), rng.uniform(0.3, 1.0));
  cv::Mat3b bg(size);
  const double denom = std::max(1, size.width + size.height);
  for (int y = 0; y < size.height; ++y) {
    cv::Vec3b* row = bg.ptr<cv::Vec3b>(y);
    for (int x = 0; x < size.width; ++x) row[x] = mix(a, b, (x + y) / denom);
  }
  const int blobs = rng.uniform_int(3, 12);
  cv::Mat3b light = bg.clone();
  for (int i = 0; i < blobs; ++i)
    cv::circle(light, {rng.uniform_int(0, size.width - 1), rng.uniform_int(0, size.height - 1)},
               std::max(2, cvRound(std::max(size.width, size.height) * rng.uniform(0.03, 0.1))),
               scalar(mix(a, {255, 255, 255}, rng.uniform(0.3, 0.8))), -1, cv::LINE_AA);
  cv::GaussianBlur(light, light, cv::Size(0, 0), std::max(1.0, std::max(size.width, size.height) / 150.0));
  return light;
}

cv::Mat3b busy_background(cv::Size size, Rng& rng) {
  switch (rng.pick({0.3, 0.25, 0.25, 0.2})) {
    case 0:
      return clutter_background(size, rng);
    case 1:
      return pattern_background(size, rng);
    case 2:
      return room_background(size, rng);
    default:
      return colour_background(size, rng);
  }
}

// Largest box of the given aspect (height/width) that fits `fill` of the area's width and height.
cv::Size2d fit_box(cv::Size2d area, double aspect, double fill) {
  double h = fill * area.height, w = h / aspect;
  if (w > fill * area.width) {
    w = fill * area.width;
    h = w * aspect;
  }
  return {std::max(4.0, w), std::max(4.0, h)};
}

// A product fully in frame with a margin; off-centre placements are common in real listings.
cv::Rect2d place_inside(cv::Size size, cv::Size2d box, Rng& rng) {
  const double mx = 0.03 * size.width, my = 0.03 * size.height;
  const double free_x = std::max(0.0, size.width - box.width - 2 * mx);
  const double free_y = std::max(0.0, size.height - box.height - 2 * my);
  return {mx + free_x * rng.uniform(0.2, 0.8), my + free_y * rng.uniform(0.25, 0.9), box.width, box.height};
}

// The product pushed across one edge (or a corner) so only 35-65% of it stays in frame.
cv::Rect2d place_cut(cv::Size size, cv::Size2d box, Rng& rng) {
  const double visible = rng.uniform(0.35, 0.65);
  cv::Rect2d r = place_inside(size, box, rng);
  const bool corner = rng.bernoulli(0.3);
  const double vx = corner ? std::sqrt(visible) : visible, vy = corner ? std::sqrt(visible) : visible;
  const int edge = rng.uniform_int(0, 3);
  const bool cut_x = corner || edge < 2, cut_y = corner || edge >= 2;
  const bool low_side = rng.bernoulli(0.5);
  if (cut_x) r.x = low_side ? -(1 - vx) * box.width : size.width - vx * box.width;
  if (cut_y) r.y = (corner ? rng.bernoulli(0.5) : edge == 2) ? -(1 - vy) * box.height : size.height - vy * box.height;
  return r;
}

void draw_product(cv::Mat3b& canvas, const Sprite& sprite, const cv::Rect2d& box, bool mirrored, Rng& rng) {
  floor_shadow(canvas, box, rng);
  if (!mirrored) {
    composite(canvas, sprite, {cvRound(box.x), cvRound(box.y)});
    return;
  }
  Sprite flipped;
  cv::flip(sprite.color, flipped.color, 1);
  cv::flip(sprite.mask, flipped.mask, 1);
  composite(canvas, flipped, {cvRound(box.x), cvRound(box.y)});
}

// Duplicate listing: the same product pasted twice side by side along the frame's long axis,
// the second copy sometimes mirrored, as a seller's copy-paste collage looks.
void render_duplicate(cv::Mat3b& canvas, ProductKind kind, Rng& rng) {
  const cv::Size size = canvas.size();
  const bool horizontal = size.width >= size.height * 0.9;
  const cv::Size2d slot =
      horizontal ? cv::Size2d(size.width / 2.0, size.height) : cv::Size2d(size.width, size.height / 2.0);
  const Look look = random_look(kind, rng);
  const cv::Size2d box = fit_box(slot, product_aspect(kind, rng), rng.uniform(0.6, 0.88));
  const Sprite sprite = make_sprite(look, cv::Size(cvRound(box.width), cvRound(box.height)), rng);
  const double jitter = rng.uniform(-0.04, 0.04);
  for (int i = 0; i < 2; ++i) {
    cv::Rect2d r;
    if (horizontal) {
      r = {slot.width * (i + 0.5) - box.width / 2 + jitter * slot.width, (size.height - box.height) * 0.6, box.width,
           box.height};
    } else {
      r = {(size.width - box.width) / 2 + jitter * slot.width, slot.height * (i + 0.5) - box.height / 2, box.width,
           box.height};
    }
    draw_product(canvas, sprite, r, i == 1 && !look.brand && rng.bernoulli(0.3), rng);
  }
}

// A smaller prop of another kind beside the hero product: two different items must not read
// as a duplicate listing.
void render_prop(cv::Mat3b& canvas, ProductKind hero, Rng& rng) {
  const auto kind =
      static_cast<ProductKind>((static_cast<int>(hero) + rng.uniform_int(1, kNumProductKinds - 1)) % kNumProductKinds);
  const cv::Size2d box = fit_box(canvas.size(), product_aspect(kind, rng), rng.uniform(0.25, 0.4));
  const bool left = rng.bernoulli(0.5);
  const cv::Rect2d r(left ? canvas.cols * 0.04 : canvas.cols * 0.96 - box.width, canvas.rows * 0.95 - box.height,
                     box.width, box.height);
  draw_product(canvas, make_sprite(random_look(kind, rng), cv::Size(cvRound(box.width), cvRound(box.height)), rng), r,
               false, rng);
}

}  // namespace

cv::Mat3b render_scene(Defect defect, ProductKind kind, cv::Size size, Rng& rng) {
  cv::Mat3b canvas = defect == Defect::kBackgroundIssue ? busy_background(size, rng) : studio_background(size, rng);
  if (defect == Defect::kDuplicate) {
    render_duplicate(canvas, kind, rng);
    return canvas;
  }
  if (rng.bernoulli(0.12)) render_prop(canvas, kind, rng);
  const Look look = random_look(kind, rng);
  const bool cropped = defect == Defect::kCropped;
  const cv::Size2d box =
      fit_box(size, product_aspect(kind, rng), cropped ? rng.uniform(0.7, 0.95) : rng.uniform(0.5, 0.88));
  const cv::Rect2d r = cropped ? place_cut(size, box, rng) : place_inside(size, box, rng);
  // Mirroring would flip the brand text.
  draw_product(canvas, make_sprite(look, cv::Size(cvRound(box.width), cvRound(box.height)), rng), r,
               !look.brand && rng.bernoulli(0.5), rng);
  return canvas;
}

}  // namespace shoplens::synth
