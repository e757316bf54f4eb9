#include "shoplens/data/image_io.h"

#include <turbojpeg.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "shoplens/core/errors.h"
#include "shoplens/core/strings.h"

namespace shoplens {
namespace {

// One TurboJPEG instance per image, never one kept per thread: libjpeg keeps the marker
// reader's position and the Huffman and quantisation tables in the instance between images (for
// abbreviated streams), and libjpeg-turbo 2.1's tjDecompressHeader3 returns from an error without
// resetting it. A reused instance then parsed the next file from the damaged file's state (a
// file cut inside its Huffman table made every later JPEG on the thread fail with "Bogus Huffman
// table definition"). A fresh instance costs about 0.2 us, nothing next to a decode.
class TjInstance {
 public:
  enum Kind { kDecompress, kCompress };
  explicit TjInstance(Kind kind) : handle_(kind == kCompress ? tjInitCompress() : tjInitDecompress()) {
    if (!handle_) throw Error("cannot initialise TurboJPEG");
  }
  ~TjInstance() { tjDestroy(handle_); }
  TjInstance(const TjInstance&) = delete;
  TjInstance& operator=(const TjInstance&) = delete;
  tjhandle get() const { return handle_; }

 private:
  tjhandle handle_;
};

std::string tj_error(tjhandle h) { return tjGetErrorStr2(h); }

// The largest reduction whose result still covers `min_short_side`.
tjscalingfactor pick_scale(int width, int height, int min_short_side) {
  tjscalingfactor best{1, 1};
  if (min_short_side <= 0) return best;
  int count = 0;
  const tjscalingfactor* factors = tjGetScalingFactors(&count);
  for (int i = 0; i < count; ++i) {
    const auto& f = factors[i];
    if (f.num > f.denom) continue;  // never upscale here
    int w = TJSCALED(width, f), h = TJSCALED(height, f);
    int best_w = TJSCALED(width, best);
    if (std::min(w, h) >= min_short_side && w < best_w) best = f;
  }
  return best;
}

DecodedImage decode_jpeg(const std::uint8_t* data, std::size_t size, const DecodeOptions& options) {
  TjInstance instance(TjInstance::kDecompress);
  tjhandle h = instance.get();
  int width = 0, height = 0, subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(h, data, static_cast<unsigned long>(size), &width, &height, &subsamp, &colorspace) != 0)
    throw DataError("corrupt JPEG header: " + tj_error(h));
  if (width <= 0 || height <= 0) throw DataError("JPEG has no pixels");
  if (static_cast<double>(width) * height > options.max_megapixels * 1e6)
    throw DataError("image too large: " + std::to_string(width) + "x" + std::to_string(height) + " exceeds " +
                    std::to_string(options.max_megapixels) + " megapixels");
  DecodedImage out;
  out.format = ImageFormat::kJpeg;
  out.original_width = width;
  out.original_height = height;
  if (colorspace == TJCS_CMYK || colorspace == TJCS_YCCK) {
    // TurboJPEG cannot convert CMYK to RGB; OpenCV's libjpeg path can.
    cv::Mat bgr = cv::imdecode(cv::Mat(1, static_cast<int>(size), CV_8UC1, const_cast<std::uint8_t*>(data)), cv::IMREAD_COLOR);
    if (bgr.empty()) throw DataError("cannot decode CMYK JPEG");
    cv::cvtColor(bgr, out.rgb, cv::COLOR_BGR2RGB);
    return out;
  }
  tjscalingfactor scale = pick_scale(width, height, options.min_short_side);
  int w = TJSCALED(width, scale), hgt = TJSCALED(height, scale);
  out.scale_denominator = scale.denom / scale.num;
  out.rgb.create(hgt, w, CV_8UC3);
  // STOPONWARNING: a truncated file must fail, not come back padded with grey.
  if (tjDecompress2(h, data, static_cast<unsigned long>(size), out.rgb.data, w, 0, hgt, TJPF_RGB,
                    TJFLAG_FASTDCT | TJFLAG_STOPONWARNING) != 0)
    throw DataError("corrupt JPEG: " + tj_error(h));
  return out;
}

DecodedImage decode_with_opencv(const std::uint8_t* data, std::size_t size, ImageFormat format,
                                const DecodeOptions& options) {
  cv::Mat buffer(1, static_cast<int>(size), CV_8UC1, const_cast<std::uint8_t*>(data));
  cv::Mat bgr;
  try {
    bgr = cv::imdecode(buffer, cv::IMREAD_COLOR);
  } catch (const cv::Exception& e) {
    throw DataError(std::string("corrupt ") + format_name(format) + ": " + e.what());
  }
  if (bgr.empty()) throw DataError(std::string("corrupt or unsupported ") + format_name(format) + " data");
  if (static_cast<double>(bgr.cols) * bgr.rows > options.max_megapixels * 1e6)
    throw DataError("image too large: " + std::to_string(bgr.cols) + "x" + std::to_string(bgr.rows));
  DecodedImage out;
  out.format = format;
  out.original_width = bgr.cols;
  out.original_height = bgr.rows;
  cv::cvtColor(bgr, out.rgb, cv::COLOR_BGR2RGB);
  return out;
}

}  // namespace

const char* format_name(ImageFormat format) {
  switch (format) {
    case ImageFormat::kJpeg: return "JPEG";
    case ImageFormat::kPng: return "PNG";
    case ImageFormat::kBmp: return "BMP";
    case ImageFormat::kWebp: return "WebP";
    case ImageFormat::kTiff: return "TIFF";
    case ImageFormat::kGif: return "GIF";
    case ImageFormat::kUnknown: break;
  }
  return "unknown";
}

ImageFormat sniff_format(const std::uint8_t* d, std::size_t n) {
  if (n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF) return ImageFormat::kJpeg;
  if (n >= 8 && std::memcmp(d, "\x89PNG\r\n\x1a\n", 8) == 0) return ImageFormat::kPng;
  if (n >= 2 && d[0] == 'B' && d[1] == 'M') return ImageFormat::kBmp;
  if (n >= 12 && std::memcmp(d, "RIFF", 4) == 0 && std::memcmp(d + 8, "WEBP", 4) == 0) return ImageFormat::kWebp;
  if (n >= 4 && (std::memcmp(d, "II*\0", 4) == 0 || std::memcmp(d, "MM\0*", 4) == 0)) return ImageFormat::kTiff;
  if (n >= 6 && (std::memcmp(d, "GIF87a", 6) == 0 || std::memcmp(d, "GIF89a", 6) == 0)) return ImageFormat::kGif;
  return ImageFormat::kUnknown;
}

ImageFormat format_from_extension(const std::filesystem::path& path) {
  std::string ext = to_lower(path.extension().string());
  if (ext == ".jpg" || ext == ".jpeg") return ImageFormat::kJpeg;
  if (ext == ".png") return ImageFormat::kPng;
  if (ext == ".bmp") return ImageFormat::kBmp;
  if (ext == ".webp") return ImageFormat::kWebp;
  if (ext == ".tif" || ext == ".tiff") return ImageFormat::kTiff;
  if (ext == ".gif") return ImageFormat::kGif;
  return ImageFormat::kUnknown;
}

DecodedImage decode_image(const std::uint8_t* data, std::size_t size, const DecodeOptions& options) {
  if (size == 0) throw DataError("empty file (0 bytes)");
  ImageFormat format = sniff_format(data, size);
  switch (format) {
    case ImageFormat::kUnknown: throw DataError("not an image (unrecognised content)");
    case ImageFormat::kGif: throw DataError("GIF is not supported (convert to PNG or JPEG)");
    case ImageFormat::kJpeg: return decode_jpeg(data, size, options);
    default: return decode_with_opencv(data, size, format, options);
  }
}

void decode_jpeg_into(const std::uint8_t* data, std::size_t size, cv::Mat& rgb) {
  TjInstance instance(TjInstance::kDecompress);
  tjhandle h = instance.get();
  int width = 0, height = 0, subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(h, data, static_cast<unsigned long>(size), &width, &height, &subsamp, &colorspace) != 0)
    throw DataError("corrupt JPEG payload: " + tj_error(h));
  rgb.create(height, width, CV_8UC3);
  if (tjDecompress2(h, data, static_cast<unsigned long>(size), rgb.data, width, 0, height, TJPF_RGB,
                    TJFLAG_FASTDCT | TJFLAG_STOPONWARNING) != 0)
    throw DataError("corrupt JPEG payload: " + tj_error(h));
}

std::vector<std::uint8_t> encode_jpeg(const cv::Mat& rgb, int quality) {
  if (rgb.type() != CV_8UC3 || !rgb.isContinuous()) throw Error("encode_jpeg needs a continuous CV_8UC3 image");
  TjInstance instance(TjInstance::kCompress);
  tjhandle h = instance.get();
  unsigned char* out = nullptr;
  unsigned long out_size = 0;
  if (tjCompress2(h, rgb.data, rgb.cols, 0, rgb.rows, TJPF_RGB, &out, &out_size, TJSAMP_420, quality,
                  TJFLAG_FASTDCT) != 0) {
    if (out) tjFree(out);
    throw Error("JPEG encoding failed: " + tj_error(h));
  }
  std::vector<std::uint8_t> bytes(out, out + out_size);
  tjFree(out);
  return bytes;
}

cv::Mat resize_short_side(const cv::Mat& rgb, int short_side, int max_long_side) {
  const int w = rgb.cols, h = rgb.rows;
  double scale = static_cast<double>(short_side) / std::min(w, h);
  scale = std::min(scale, static_cast<double>(max_long_side) / std::max(w, h));
  if (scale >= 1.0) return rgb;
  int nw = std::max(1, static_cast<int>(w * scale + 0.5)), nh = std::max(1, static_cast<int>(h * scale + 0.5));
  cv::Mat out;
  cv::resize(rgb, out, cv::Size(nw, nh), 0, 0, cv::INTER_AREA);
  return out;
}

std::vector<std::uint8_t> read_binary_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw DataError(std::string("cannot read file: ") + std::strerror(errno));
  std::streamsize size = in.tellg();
  if (size < 0) throw DataError("cannot read file size");
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
  in.seekg(0);
  if (size > 0 && !in.read(reinterpret_cast<char*>(bytes.data()), size)) throw DataError("short read");
  return bytes;
}

}  // namespace shoplens
