// JPEG through libjpeg-turbo's TurboJPEG API: decoding (RGB, grayscale, CMYK/YCCK; at a reduced
// scale in the DCT domain when the caller needs fewer pixels) and encoding.
#include <turbojpeg.h>

#include <string>

#include "codecs.h"
#include "shoplens/core/errors.h"

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

struct JpegHeader {
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
};

// `what` names the input in the reason: "JPEG" (an original) or "JPEG payload" (a shard's).
JpegHeader read_header(tjhandle h, const std::uint8_t* data, std::size_t size, const std::string& what) {
  JpegHeader header;
  if (tjDecompressHeader3(h, data, static_cast<unsigned long>(size), &header.width, &header.height, &header.subsampling,
                          &header.colorspace) != 0)
    throw DataError("corrupt " + what + " header: " + tj_error(h));
  return header;
}

// STOPONWARNING: a truncated file must fail, not come back padded with grey.
void decompress(tjhandle h, const std::uint8_t* data, std::size_t size, cv::Mat& pixels, int pixel_format,
                const std::string& what, bool accurate_dct = false) {
  const int dct = accurate_dct ? TJFLAG_ACCURATEDCT : TJFLAG_FASTDCT;
  if (tjDecompress2(h, data, static_cast<unsigned long>(size), pixels.data, pixels.cols, 0, pixels.rows, pixel_format,
                    dct | TJFLAG_STOPONWARNING) != 0)
    throw DataError("corrupt " + what + ": " + tj_error(h));
}

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

// Adobe CMYK JPEGs (Photoshop's, and every YCCK file) store inverted ink, 255 meaning none; the
// colour is then the ink-free share of each channel times the black one: red = c * k / 255 with
// c and k as stored. This is what libjpeg-based readers (OpenCV's included) compute.
cv::Mat inverted_cmyk_to_rgb(const cv::Mat& cmyk) {
  cv::Mat rgb(cmyk.rows, cmyk.cols, CV_8UC3);
  for (int y = 0; y < cmyk.rows; ++y) {
    const std::uint8_t* in = cmyk.ptr<std::uint8_t>(y);
    std::uint8_t* out = rgb.ptr<std::uint8_t>(y);
    for (int x = 0; x < cmyk.cols; ++x, in += 4, out += 3) {
      const int k = in[3];
      for (int c = 0; c < 3; ++c) out[c] = static_cast<std::uint8_t>((in[c] * k + 127) / 255);
    }
  }
  return rgb;
}

}  // namespace

namespace codecs {

DecodedImage decode_jpeg(const std::uint8_t* data, std::size_t size, const DecodeOptions& options) {
  TjInstance instance(TjInstance::kDecompress);
  const JpegHeader header = read_header(instance.get(), data, size, "JPEG");
  check_declared_size(ImageFormat::kJpeg, header.width, header.height, options);
  const tjscalingfactor scale = pick_scale(header.width, header.height, options.min_short_side);
  DecodedImage out;
  out.format = ImageFormat::kJpeg;
  out.original_width = header.width;
  out.original_height = header.height;
  out.scale_denominator = scale.denom / scale.num;
  // TurboJPEG has no CMYK to RGB conversion: it decodes CMYK and YCCK to CMYK, and we convert.
  const bool cmyk = header.colorspace == TJCS_CMYK || header.colorspace == TJCS_YCCK;
  // A CMYK decode is converted into a second, RGB image.
  announce_allocation(
      options, std::uint64_t(TJSCALED(header.width, scale)) * TJSCALED(header.height, scale) * (cmyk ? 4 + 3 : 3));
  cv::Mat pixels(TJSCALED(header.height, scale), TJSCALED(header.width, scale), cmyk ? CV_8UC4 : CV_8UC3);
  decompress(instance.get(), data, size, pixels, cmyk ? TJPF_CMYK : TJPF_RGB, "JPEG", options.accurate_dct);
  out.rgb = cmyk ? inverted_cmyk_to_rgb(pixels) : pixels;
  // decode_jpeg_into runs this same decompress (RGB, fast DCT) at full scale.
  out.usable_as_payload = !cmyk && scale.num == scale.denom && !options.accurate_dct;
  return out;
}

}  // namespace codecs

void decode_jpeg_into(const std::uint8_t* data, std::size_t size, cv::Mat& rgb) {
  TjInstance instance(TjInstance::kDecompress);
  const JpegHeader header = read_header(instance.get(), data, size, "JPEG payload");
  if (header.width <= 0 || header.height <= 0) throw DataError("corrupt JPEG payload: it has no pixels");
  rgb.create(header.height, header.width, CV_8UC3);
  decompress(instance.get(), data, size, rgb, TJPF_RGB, "JPEG payload");
}

std::vector<std::uint8_t> encode_jpeg(const cv::Mat& image, const JpegEncodeOptions& options) {
  if (image.type() != CV_8UC3 || image.empty()) throw Error("encode_jpeg needs a non-empty CV_8UC3 image");
  TjInstance instance(TjInstance::kCompress);
  unsigned char* out = nullptr;
  unsigned long out_size = 0;
  const int pixel_format = options.order == ChannelOrder::kBgr ? TJPF_BGR : TJPF_RGB;
  if (tjCompress2(instance.get(), image.data, image.cols, static_cast<int>(image.step[0]), image.rows, pixel_format,
                  &out, &out_size, TJSAMP_420, options.quality,
                  options.fast_dct ? TJFLAG_FASTDCT : TJFLAG_ACCURATEDCT) != 0) {
    if (out) tjFree(out);
    throw Error("JPEG encoding failed: " + tj_error(instance.get()));
  }
  std::vector<std::uint8_t> bytes(out, out + out_size);
  tjFree(out);
  return bytes;
}

std::vector<std::uint8_t> encode_jpeg(const cv::Mat& rgb, int quality) {
  JpegEncodeOptions options;
  options.quality = quality;
  return encode_jpeg(rgb, options);
}

}  // namespace shoplens
