// The pixel-level defect processes of the synthetic catalog, each modelled on the physical
// cause it is named after. Strengths are set in "224-pixel units" and scaled by the image's
// long side, so a defect looks the same after the training resize whatever the original size.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include <opencv2/imgproc.hpp>

#include "shoplens/data/image_io.h"
#include "synth_internal.h"

namespace shoplens::synth {
namespace {

constexpr double kPi = 3.14159265358979323846;

double scale_of(const cv::Mat3b& image) { return std::max(image.cols, image.rows) / 224.0; }

// 2^20 standard normal samples, fixed for the process. Each image row reads its noise from a
// random offset in the table: an order of magnitude cheaper than drawing normals per pixel, and
// with a million samples no pattern repeats within or across images in a visible way.
constexpr std::size_t kNoiseTableSize = std::size_t{1} << 20;

const std::vector<float>& noise_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(kNoiseTableSize);
    Rng rng(0x5eed5eedULL);
    for (auto& v : t) v = static_cast<float>(rng.normal());
    return t;
  }();
  return table;
}

// How a camera turns the scene into pixel values: per-channel gain (exposure times white
// balance, B, G, R order), a tone curve (gamma, offset, clipping), and sensor noise with
// variance shot * I + read (photon shot noise grows with the signal, read noise does not).
// `chroma` in [0, 1] mixes per-channel noise into luma noise.
struct Capture {
  std::array<double, 3> gain{1, 1, 1};
  double gamma = 1, offset = 0;
  double shot = 0, read = 0, chroma = 1;
};

// One pass over the pixels: tone curve and noise are both table lookups per channel.
void capture(cv::Mat3b& image, const Capture& cap, Rng& rng) {
  std::array<std::array<uchar, 256>, 3> tone{};
  std::array<std::array<float, 256>, 3> sigma{};
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < 256; ++i) {
      const double v = std::clamp((i * cap.gain[c] + cap.offset) / 255.0, 0.0, 1.0);
      tone[c][i] = cv::saturate_cast<uchar>(255.0 * std::pow(v, cap.gamma));
      sigma[c][i] = static_cast<float>(std::sqrt(cap.shot * tone[c][i] + cap.read));
    }
  const std::vector<float>& table = noise_table();
  const bool noisy = cap.shot > 0 || cap.read > 0;
  const int width = image.cols;
  const float luma_w = static_cast<float>(std::sqrt(std::max(0.0, 1 - cap.chroma * cap.chroma)));
  const float chroma_w = static_cast<float>(cap.chroma);
  for (int y = 0; y < image.rows; ++y) {
    uchar* row = image.ptr<uchar>(y);
    if (!noisy) {
      for (int x = 0; x < width; ++x, row += 3)
        for (int c = 0; c < 3; ++c) row[c] = tone[c][row[c]];
      continue;
    }
    const float* luma = table.data() + rng.next() % (kNoiseTableSize - width);
    const float* chroma = table.data() + rng.next() % (kNoiseTableSize - 3 * width);
    for (int x = 0; x < width; ++x, row += 3, chroma += 3) {
      const float l = luma_w * luma[x];
      for (int c = 0; c < 3; ++c) {
        // Integer clamping compiles to conditional moves; a float clamp became a branch that
        // mispredicts on near-white studio backgrounds, where half the values clip.
        // Rounds half up without a libm call; what falls below 0 is clamped to 0 either way.
        const float shade = tone[c][row[c]] + sigma[c][row[c]] * (l + chroma_w * chroma[c]);
        const int v = static_cast<int>(shade + 0.5f);  // NOLINT(bugprone-incorrect-roundings)
        row[c] = static_cast<uchar>(std::min(std::max(v, 0), 255));
      }
    }
  }
}

void gaussian_blur(cv::Mat3b& image, double sigma) {
  if (sigma >= 0.3) cv::GaussianBlur(image, image, cv::Size(0, 0), sigma, sigma, cv::BORDER_REFLECT);
}

// Convolves with a kernel made for the image's own scale. A big kernel costs a DFT per image;
// since the blur removes the detail a smaller copy would lose anyway, large images are blurred
// at a long side of kBlurSide and scaled back.
constexpr double kBlurSide = 320.0;

template <class MakeKernel>
void convolve_scaled(cv::Mat3b& image, MakeKernel make_kernel) {
  const double reduce = std::max(1.0, std::max(image.cols, image.rows) / kBlurSide);
  if (reduce == 1.0) {
    cv::filter2D(image, image, -1, make_kernel(1.0), cv::Point(-1, -1), 0, cv::BORDER_REFLECT);
    return;
  }
  cv::Mat3b small;
  cv::resize(image, small, cv::Size(cvRound(image.cols / reduce), cvRound(image.rows / reduce)), 0, 0, cv::INTER_AREA);
  cv::filter2D(small, small, -1, make_kernel(reduce), cv::Point(-1, -1), 0, cv::BORDER_REFLECT);
  cv::resize(small, image, image.size(), 0, 0, cv::INTER_LINEAR);
}

// A straight camera-shake streak `length` pixels long (before dividing by `reduce`).
cv::Mat1f motion_kernel(double length, double angle, double reduce) {
  const double l = std::max(2.0, length / reduce);
  const int k = static_cast<int>(std::ceil(l)) | 1;
  cv::Mat1f kernel = cv::Mat1f::zeros(k, k);
  const cv::Point2d c(k / 2.0, k / 2.0), d(std::cos(angle) * l / 2, std::sin(angle) * l / 2);
  cv::line(kernel, (c - d) * 16, (c + d) * 16, cv::Scalar(1.0), 1, cv::LINE_AA, 4);
  return kernel / cv::sum(kernel)[0];
}

// A lens defocus disc (the aperture's image) of `radius` pixels.
cv::Mat1f defocus_kernel(double radius, double reduce) {
  const double r = std::max(1.0, radius / reduce);
  const int k = static_cast<int>(std::ceil(2 * r + 1)) | 1;
  cv::Mat1f kernel = cv::Mat1f::zeros(k, k);
  cv::circle(kernel, cv::Point2d(k / 2.0, k / 2.0) * 16, cvRound(r * 16), cv::Scalar(1.0), -1, cv::LINE_AA, 4);
  return kernel / cv::sum(kernel)[0];
}

// Out of focus or shaken: a Gaussian, a camera-shake line or a lens defocus disc.
void blur(cv::Mat3b& image, Rng& rng) {
  const double s = scale_of(image);
  switch (rng.pick({0.45, 0.35, 0.2})) {
    case 0:
      gaussian_blur(image, rng.uniform(1.2, 3.2) * s);
      break;
    case 1: {
      const double length = std::max(3.0, rng.uniform(6.0, 16.0) * s), angle = rng.uniform(0, kPi);
      convolve_scaled(image, [&](double reduce) { return motion_kernel(length, angle, reduce); });
      break;
    }
    default: {
      const double radius = std::max(1.5, rng.uniform(2.0, 4.5) * s);
      convolve_scaled(image, [&](double reduce) { return defocus_kernel(radius, reduce); });
    }
  }
}

// Too little light: the exposure drops, the tone curve crushes the shadows, and the sensor's
// shot and read noise (amplified by the gain the camera then applies) become visible.
void low_light(cv::Mat3b& image, Rng& rng) {
  Capture cap;
  cap.gain.fill(rng.uniform(0.18, 0.4));
  cap.gamma = rng.uniform(1.0, 1.3);
  cap.shot = rng.uniform(0.4, 1.2);
  cap.read = rng.uniform(4, 30);
  cap.chroma = rng.uniform(0.5, 1.0);
  capture(image, cap, rng);
}

// Too much light: gain past the sensor's range, so highlights clip to white and colours wash out.
void overexpose(cv::Mat3b& image, Rng& rng) {
  Capture cap;
  cap.gain.fill(rng.uniform(1.6, 2.4));
  cap.gamma = rng.uniform(0.75, 0.95);
  cap.offset = rng.uniform(0, 25);
  capture(image, cap, rng);
}

// High ISO at normal exposure: strong signal-dependent grain with colour speckle.
void noisy(cv::Mat3b& image, Rng& rng) {
  Capture cap;
  cap.shot = rng.uniform(1.0, 3.0);
  cap.read = rng.uniform(60, 350);
  cap.chroma = rng.uniform(0.3, 1.0);
  capture(image, cap, rng);
}

// Wrong white balance: channel gains along a random hue direction (tungsten orange, fluorescent
// green, shade blue, ...). The direction is random so no single colour marks the class.
void color_cast(cv::Mat3b& image, Rng& rng) {
  const double theta = rng.uniform(0, 2 * kPi), strength = rng.uniform(0.22, 0.42);
  Capture cap;
  const std::array<double, 3> phase = {4 * kPi / 3, 2 * kPi / 3, 0};  // B, G, R
  for (int c = 0; c < 3; ++c) cap.gain[c] = 1 + strength * std::cos(theta - phase[c]);
  const double top = *std::max_element(cap.gain.begin(), cap.gain.end()) / rng.uniform(1.0, 1.1);
  for (auto& g : cap.gain) g /= top;
  capture(image, cap, rng);
}

// A small original blown up: downscale by 4-8x, upscale with a cheap interpolator.
void low_resolution(cv::Mat3b& image, Rng& rng) {
  const double factor = rng.uniform(4.0, 8.0);
  const cv::Size small(std::max(8, cvRound(image.cols / factor)), std::max(8, cvRound(image.rows / factor)));
  cv::Mat3b tiny;
  cv::resize(image, tiny, small, 0, 0, cv::INTER_AREA);
  static const int kUp[] = {cv::INTER_NEAREST, cv::INTER_LINEAR, cv::INTER_CUBIC};
  cv::resize(tiny, image, image.size(), 0, 0, kUp[rng.pick({0.4, 0.45, 0.15})]);
}

// An upload pipeline that re-saved the photo at a very low JPEG quality: 8x8 blocks, ringing
// and chroma smearing survive the later high-quality save.
void compress(cv::Mat3b& image, Rng& rng) {
  JpegEncodeOptions options;
  options.quality = rng.uniform_int(3, 12);
  options.order = ChannelOrder::kBgr;
  options.fast_dct = false;
  const std::vector<std::uint8_t> bytes = encode_jpeg(image, options);
  cv::Mat rgb;
  decode_jpeg_into(bytes.data(), bytes.size(), rgb);
  cv::cvtColor(rgb, image, cv::COLOR_RGB2BGR);
}

const std::array<const char*, 8> kMarks = {"SAMPLE",       "(c) STOCKPIX", "WATERMARK",      "PREVIEW",
                                           "shopfoto.com", "DO NOT COPY",  "(c) 2023 BRAND", "proofs only"};

// Draws `text` centred at `centre` into the mask, `width` pixels wide.
void mark_text(cv::Mat1b& mask, const std::string& text, cv::Point2d centre, double width, int font) {
  const int thickness = std::max(1, cvRound(width / 70));
  int baseline = 0;
  const cv::Size unit = cv::getTextSize(text, font, 1.0, thickness, &baseline);
  const double scale = width / std::max(1, unit.width);
  cv::putText(mask, text,
              cv::Point(cvRound(centre.x - scale * unit.width / 2), cvRound(centre.y + scale * unit.height / 2)), font,
              scale, cv::Scalar(255), thickness, cv::LINE_AA);
}

// A big mask drawn upright, then rotated into the frame.
cv::Mat1b rotated_marks(cv::Size size, double angle_degrees, bool tiled, const std::string& text, int font, Rng& rng) {
  const int d = static_cast<int>(std::ceil(std::hypot(size.width, size.height)));
  cv::Mat1b big(d, d, uchar(0));
  if (tiled) {
    const double width = std::max(size.width, size.height) * rng.uniform(0.25, 0.4);
    const double step_y = width * rng.uniform(0.35, 0.6);
    for (int j = 0; j * step_y < d; ++j)
      for (double x = (j % 2) * width * 0.6; x < d + width; x += width * 1.2)
        mark_text(big, text, {x, j * step_y + step_y / 2}, width, font);
  } else {
    mark_text(big, text, {d / 2.0, d / 2.0}, std::min(size.width, size.height) * rng.uniform(0.6, 0.9), font);
  }
  cv::Mat m = cv::getRotationMatrix2D(cv::Point2f(d / 2.0f, d / 2.0f), angle_degrees, 1.0);
  m.at<double>(0, 2) += size.width / 2.0 - d / 2.0;
  m.at<double>(1, 2) += size.height / 2.0 - d / 2.0;
  cv::Mat1b out;
  cv::warpAffine(big, out, m, size, cv::INTER_LINEAR, cv::BORDER_CONSTANT, cv::Scalar(0));
  return out;
}

// A stock-photo logo in a corner: a ring with the mark's text beside it.
cv::Mat1b corner_logo(cv::Size size, const std::string& text, int font, Rng& rng) {
  cv::Mat1b mask(size, uchar(0));
  const double width = size.width * rng.uniform(0.3, 0.5);
  const double r = width * 0.12;
  const bool right = rng.bernoulli(0.6), bottom = rng.bernoulli(0.7);
  const cv::Point2d origin(right ? size.width - width - size.width * 0.04 : size.width * 0.04,
                           bottom ? size.height - 3 * r - size.height * 0.04 : size.height * 0.04);
  cv::circle(mask, (origin + cv::Point2d(r, 1.5 * r)) * 16, cvRound(r * 16), cv::Scalar(255),
             std::max(1, cvRound(r / 4)), cv::LINE_AA, 4);
  mark_text(mask, text, origin + cv::Point2d(2.5 * r + (width - 2.5 * r) / 2, 1.5 * r), width - 2.5 * r, font);
  return mask;
}

// Semi-transparent overlaid marks: a rotated tiled pattern, one big diagonal word, or a logo.
void watermark(cv::Mat3b& image, Rng& rng) {
  const std::string text = kMarks[rng.uniform_int(0, static_cast<int>(kMarks.size()) - 1)];
  const int font = rng.bernoulli(0.5) ? cv::FONT_HERSHEY_SIMPLEX : cv::FONT_HERSHEY_DUPLEX;
  cv::Mat1b mask;
  switch (rng.pick({0.45, 0.3, 0.25})) {
    case 0:
      mask = rotated_marks(image.size(), rng.uniform(-45, 45), true, text, font, rng);
      break;
    case 1:
      mask = rotated_marks(image.size(), rng.uniform(-35, 35), false, text, font, rng);
      break;
    default:
      mask = corner_logo(image.size(), text, font, rng);
      break;
  }
  cv::Vec3f colour;
  switch (rng.pick({0.55, 0.3, 0.15})) {
    case 0:
      colour = {255, 255, 255};
      break;
    case 1:
      colour = cv::Vec3f::all(static_cast<float>(rng.uniform(0, 90)));
      break;
    default:
      colour = {float(rng.uniform(0, 255)), float(rng.uniform(0, 255)), float(rng.uniform(0, 255))};
  }
  const float alpha = static_cast<float>(rng.uniform(0.3, 0.6));
  for (int y = 0; y < image.rows; ++y) {
    cv::Vec3b* row = image.ptr<cv::Vec3b>(y);
    const uchar* m = mask.ptr<uchar>(y);
    for (int x = 0; x < image.cols; ++x) {
      if (!m[x]) continue;
      const float a = alpha * m[x] / 255.0f;
      for (int c = 0; c < 3; ++c) row[x][c] = cv::saturate_cast<uchar>(row[x][c] + (colour[c] - row[x][c]) * a);
    }
  }
}

}  // namespace

void apply_natural_variation(cv::Mat3b& image, Rng& rng) {
  if (rng.bernoulli(0.3)) gaussian_blur(image, rng.uniform(0.3, 0.7) * scale_of(image));
  Capture cap;
  const double exposure = std::pow(2.0, rng.uniform(-0.25, 0.2));
  for (auto& g : cap.gain) g = exposure * (1 + rng.uniform(-0.04, 0.04));
  cap.gamma = rng.uniform(0.92, 1.08);
  cap.shot = rng.uniform(0.0, 0.08);
  cap.read = rng.uniform(0.2, 4.0);
  cap.chroma = rng.uniform(0.3, 0.8);
  capture(image, cap, rng);
}

void apply_defect(cv::Mat3b& image, Defect defect, Rng& rng) {
  switch (defect) {
    case Defect::kBlurry:
      blur(image, rng);
      break;
    case Defect::kLowLight:
      low_light(image, rng);
      break;
    case Defect::kOverexposed:
      overexpose(image, rng);
      break;
    case Defect::kNoisy:
      noisy(image, rng);
      break;
    case Defect::kWatermark:
      watermark(image, rng);
      break;
    case Defect::kLowResolution:
      low_resolution(image, rng);
      break;
    case Defect::kColorCast:
      color_cast(image, rng);
      break;
    case Defect::kCompressionArtifacts:
      compress(image, rng);
      break;
    // Made while rendering the scene: nothing to do to the pixels.
    case Defect::kGood:
    case Defect::kBackgroundIssue:
    case Defect::kCropped:
    case Defect::kDuplicate:
      break;
  }
}

}  // namespace shoplens::synth
