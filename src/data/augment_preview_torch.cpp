#include "shoplens/data/augment_preview.h"

#include <algorithm>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "shoplens/core/errors.h"
#include "shoplens/data/batch.h"
#include "shoplens/data/image_io.h"

namespace shoplens {
namespace {

constexpr int kColumns = 4;
constexpr int kMaxImages = 16;
// Tiles narrower than this are enlarged (nearest neighbour, the pixels stay visible) so that a
// caption fits under a 32 px image too.
constexpr int kMinTileWidth = 192;
constexpr int kLineHeight = 16;
constexpr int kCaptionLines = 2;
constexpr double kFontScale = 0.4;

// One normalised CHW image back to 8-bit BGR.
cv::Mat unnormalised(const float* chw, int size, const AugmentConfig& augment) {
  cv::Mat bgr(size, size, CV_8UC3);
  const std::size_t plane = static_cast<std::size_t>(size) * size;
  for (int y = 0; y < size; ++y)
    for (int x = 0; x < size; ++x)
      for (int c = 0; c < 3; ++c) {
        const float v = chw[c * plane + static_cast<std::size_t>(y) * size + x] * static_cast<float>(augment.std[c]) +
                        static_cast<float>(augment.mean[c]);
        bgr.at<cv::Vec3b>(y, x)[2 - c] = cv::saturate_cast<std::uint8_t>(v * 255.0f);
      }
  return bgr;
}

// `text` cut (with "...") to what fits in `width` pixels.
std::string fitted(std::string text, int width) {
  int baseline = 0;
  const auto fits = [&](const std::string& t) {
    return cv::getTextSize(t, cv::FONT_HERSHEY_SIMPLEX, kFontScale, 1, &baseline).width <= width;
  };
  if (fits(text)) return text;
  while (!text.empty() && !fits(text + "...")) text.pop_back();
  return text + "...";
}

void draw_caption(cv::Mat& strip, const std::vector<std::string>& lines) {
  for (std::size_t i = 0; i < lines.size(); ++i)
    cv::putText(strip, fitted(lines[i], strip.cols - 8), cv::Point(4, kLineHeight * static_cast<int>(i + 1) - 4),
                cv::FONT_HERSHEY_SIMPLEX, kFontScale, cv::Scalar(255, 255, 255), 1, cv::LINE_AA);
}

std::vector<std::string> caption_of(const Batch& batch, int i, const AugmentConfig& augment, bool train,
                                    const std::vector<std::string>& class_names) {
  const std::int64_t label = batch.labels[i].item<std::int64_t>();
  std::string name = label >= 0 && static_cast<std::size_t>(label) < class_names.size()
                         ? class_names[static_cast<std::size_t>(label)]
                         : "class " + std::to_string(label);
  std::string what = "eval transform";
  if (train)
    what = static_cast<std::size_t>(i) < batch.sample_seeds.size()
               ? describe_augmentation(augment, batch.sample_seeds[static_cast<std::size_t>(i)])
               : "augmented";
  if (batch.mixed) what += " mixed";
  return {name, what};
}

}  // namespace

void write_augment_preview(const Batch& batch, const AugmentConfig& augment, bool train,
                           const std::vector<std::string>& class_names, const std::filesystem::path& file) {
  if (!batch.images.defined()) throw DataError("preview: the batch holds no images (a text dataset?)");
  const auto images = batch.images.contiguous();
  const int n = std::min<int>(kMaxImages, static_cast<int>(images.size(0)));
  const int size = static_cast<int>(images.size(2));
  const int tile = std::max(size, kMinTileWidth);
  const int strip = kLineHeight * kCaptionLines + 4;
  const int rows = (n + kColumns - 1) / kColumns;
  cv::Mat grid(rows * (tile + strip), kColumns * tile, CV_8UC3, cv::Scalar(32, 32, 32));
  const float* data = images.data_ptr<float>();
  for (int i = 0; i < n; ++i) {
    const int x = (i % kColumns) * tile, y = (i / kColumns) * (tile + strip);
    cv::Mat picture = unnormalised(data + static_cast<std::size_t>(i) * 3 * size * size, size, augment);
    cv::resize(picture, grid(cv::Rect(x, y, tile, tile)), cv::Size(tile, tile), 0, 0, cv::INTER_NEAREST);
    cv::Mat caption = grid(cv::Rect(x, y + tile, tile, strip));
    draw_caption(caption, caption_of(batch, i, augment, train, class_names));
  }
  write_image_file(file, grid, ChannelOrder::kBgr);
}

}  // namespace shoplens
