// WebP (lossy and lossless, still images) through libwebp's advanced decoding API, which reports
// why a file failed and decodes straight into our buffer.
#include <webp/decode.h>

#include <string>

#include "codecs.h"
#include "shoplens/core/errors.h"

namespace shoplens::codecs {
namespace {

std::string status_text(VP8StatusCode status) {
  switch (status) {
    case VP8_STATUS_OK:
      return "ok";
    case VP8_STATUS_OUT_OF_MEMORY:
      return "out of memory";
    case VP8_STATUS_INVALID_PARAM:
      return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR:
      return "bitstream error";
    case VP8_STATUS_UNSUPPORTED_FEATURE:
      return "unsupported feature";
    case VP8_STATUS_SUSPENDED:
      return "suspended";
    case VP8_STATUS_USER_ABORT:
      return "aborted";
    case VP8_STATUS_NOT_ENOUGH_DATA:
      return "the file ends early (truncated)";
  }
  return "status " + std::to_string(static_cast<int>(status));
}

}  // namespace

DecodedImage decode_webp(const std::uint8_t* data, std::size_t size, const DecodeOptions& options) {
  WebPDecoderConfig config;
  if (!WebPInitDecoderConfig(&config)) throw Error("cannot initialise libwebp (version mismatch)");
  const VP8StatusCode header = WebPGetFeatures(data, size, &config.input);
  if (header != VP8_STATUS_OK) throw DataError("corrupt WebP header: " + status_text(header));
  const auto width = static_cast<std::uint64_t>(config.input.width),
             height = static_cast<std::uint64_t>(config.input.height);
  check_declared_size(ImageFormat::kWebp, width, height, options);
  if (config.input.has_animation) throw DataError("animated WebP is not supported");
  announce_allocation(options, width * height * 3);
  DecodedImage out = allocate_image(ImageFormat::kWebp, width, height);
  // MODE_RGB drops an alpha channel, as the other decoders do.
  config.output.colorspace = MODE_RGB;
  config.output.is_external_memory = 1;
  config.output.u.RGBA.rgba = out.rgb.data;
  config.output.u.RGBA.stride = static_cast<int>(out.rgb.step[0]);
  config.output.u.RGBA.size = out.rgb.total() * out.rgb.elemSize();
  const VP8StatusCode status = WebPDecode(data, size, &config);
  WebPFreeDecBuffer(&config.output);
  if (status != VP8_STATUS_OK) throw DataError("corrupt WebP: " + status_text(status));
  return out;
}

}  // namespace shoplens::codecs
