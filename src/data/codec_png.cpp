// PNG through libpng: decoding any PNG (1-16 bits, gray, palette, alpha, interlaced) to 8-bit
// RGB, and encoding 8-bit RGB or BGR.
//
// libpng reports an error by longjmp to the last setjmp. A longjmp that skips a C++ destructor is
// undefined behaviour, so every function below that calls setjmp, and every callback libpng can
// jump out of, holds only plain C data; the C++ objects (the libpng structs' owner, the output
// image, the row pointers) live in the callers, whose frames a longjmp never crosses.
#include <png.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "codecs.h"
#include "shoplens/core/errors.h"

namespace shoplens {
namespace {

struct PngError {
  char message[200] = "";
};

void on_png_error(png_structp png, png_const_charp message) {
  auto* error = static_cast<PngError*>(png_get_error_ptr(png));
  std::snprintf(error->message, sizeof error->message, "%s", message);
  png_longjmp(png, 1);
}

// Warnings are about ancillary chunks (a bad colour profile, a stray text chunk) that do not
// change the pixels: ignored, and never printed to stderr.
void on_png_warning(png_structp, png_const_charp) {}

struct PngSource {
  const std::uint8_t* data;
  std::size_t size;
  std::size_t offset;
};

void read_from_memory(png_structp png, png_bytep out, png_size_t count) {
  auto* source = static_cast<PngSource*>(png_get_io_ptr(png));
  if (count > source->size - source->offset) png_error(png, "the file ends early (truncated)");
  std::memcpy(out, source->data + source->offset, count);
  source->offset += count;
}

// Owns the libpng read structs; created and destroyed outside any setjmp scope.
class PngReader {
 public:
  PngReader(const std::uint8_t* data, std::size_t size) : source_{data, size, 0} {
    png_ = png_create_read_struct(PNG_LIBPNG_VER_STRING, &error_, on_png_error, on_png_warning);
    if (png_) info_ = png_create_info_struct(png_);
    if (!png_ || !info_) {
      png_destroy_read_struct(&png_, &info_, nullptr);
      throw Error("cannot initialise libpng");
    }
    png_set_read_fn(png_, &source_, read_from_memory);
  }
  ~PngReader() { png_destroy_read_struct(&png_, &info_, nullptr); }
  PngReader(const PngReader&) = delete;
  PngReader& operator=(const PngReader&) = delete;

  png_structp png() const { return png_; }
  png_infop info() const { return info_; }
  [[noreturn]] void fail(const std::string& what) const { throw DataError(what + ": " + error_.message); }

 private:
  PngError error_;
  PngSource source_;
  png_structp png_ = nullptr;
  png_infop info_ = nullptr;
};

struct PngLayout {
  png_uint_32 width = 0, height = 0;
  int bit_depth = 0, color_type = 0;
  png_size_t row_bytes = 0;
  int channels = 0;
};

// Reads the chunks up to the image data. Returns false when libpng signalled an error.
bool read_png_header(png_structp png, png_infop info, PngLayout* layout) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_info(png, info);
  layout->width = png_get_image_width(png, info);
  layout->height = png_get_image_height(png, info);
  layout->bit_depth = png_get_bit_depth(png, info);
  layout->color_type = png_get_color_type(png, info);
  return true;
}

// Asks libpng for 8-bit RGB whatever the file holds. Alpha is dropped, not composited, as
// OpenCV's reader (which the shards were made with) did.
bool request_rgb8(png_structp png, png_infop info, PngLayout* layout) {
  if (setjmp(png_jmpbuf(png))) return false;
  if (layout->color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (layout->color_type == PNG_COLOR_TYPE_GRAY && layout->bit_depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (layout->bit_depth == 16) png_set_scale_16(png);
  if (layout->color_type & PNG_COLOR_MASK_ALPHA || png_get_valid(png, info, PNG_INFO_tRNS)) png_set_strip_alpha(png);
  if (!(layout->color_type & PNG_COLOR_MASK_COLOR)) png_set_gray_to_rgb(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  layout->row_bytes = png_get_rowbytes(png, info);
  layout->channels = png_get_channels(png, info);
  layout->bit_depth = png_get_bit_depth(png, info);
  return true;
}

// Reads every row (every pass when interlaced) and the chunks after them, so a file cut after
// its image data still fails.
bool read_png_rows(png_structp png, png_bytepp rows) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_image(png, rows);
  png_read_end(png, nullptr);
  return true;
}

}  // namespace

namespace codecs {

DecodedImage decode_png(const std::uint8_t* data, std::size_t size, const DecodeOptions& options) {
  PngReader reader(data, size);
  PngLayout layout;
  if (!read_png_header(reader.png(), reader.info(), &layout)) reader.fail("corrupt PNG header");
  check_declared_size(ImageFormat::kPng, layout.width, layout.height, options);
  if (!request_rgb8(reader.png(), reader.info(), &layout)) reader.fail("unsupported PNG");
  if (layout.channels != 3 || layout.bit_depth != 8 || layout.row_bytes != std::size_t{layout.width} * 3)
    throw DataError("unsupported PNG layout (" + std::to_string(layout.channels) + " channels of " +
                    std::to_string(layout.bit_depth) + " bits after conversion)");
  announce_allocation(options, std::uint64_t{layout.width} * layout.height * 3);
  DecodedImage out = allocate_image(ImageFormat::kPng, layout.width, layout.height);
  std::vector<png_bytep> rows(layout.height);
  for (png_uint_32 y = 0; y < layout.height; ++y) rows[y] = out.rgb.ptr<png_byte>(static_cast<int>(y));
  if (!read_png_rows(reader.png(), rows.data())) reader.fail("corrupt PNG");
  return out;
}

}  // namespace codecs

namespace {

// The encoded bytes, in malloc'd memory: libpng can longjmp over whoever owns them.
struct PngSink {
  unsigned char* data;
  std::size_t size, capacity;
};

void write_to_memory(png_structp png, png_bytep bytes, png_size_t count) {
  auto* sink = static_cast<PngSink*>(png_get_io_ptr(png));
  if (count > sink->capacity - sink->size) {
    std::size_t capacity = std::max({sink->capacity * 2, sink->size + count, std::size_t{1} << 16});
    auto* grown = static_cast<unsigned char*>(std::realloc(sink->data, capacity));
    if (!grown) png_error(png, "out of memory");
    sink->data = grown;
    sink->capacity = capacity;
  }
  std::memcpy(sink->data + sink->size, bytes, count);
  sink->size += count;
}

void flush_nothing(png_structp) {}

bool write_png(png_structp png, png_infop info, png_bytepp rows, int width, int height, const PngEncodeOptions* o) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_IHDR(png, info, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height), 8, PNG_COLOR_TYPE_RGB,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_set_compression_level(png, o->compression_level);
  if (o->huffman_only) png_set_compression_strategy(png, Z_HUFFMAN_ONLY);
  png_write_info(png, info);
  if (o->order == ChannelOrder::kBgr) png_set_bgr(png);
  png_write_image(png, rows);
  png_write_end(png, nullptr);
  return true;
}

// Owns the libpng write structs and the output buffer.
class PngWriter {
 public:
  PngWriter() {
    png_ = png_create_write_struct(PNG_LIBPNG_VER_STRING, &error_, on_png_error, on_png_warning);
    if (png_) info_ = png_create_info_struct(png_);
    if (!png_ || !info_) {
      png_destroy_write_struct(&png_, &info_);
      throw Error("cannot initialise libpng");
    }
    png_set_write_fn(png_, &sink_, write_to_memory, flush_nothing);
  }
  ~PngWriter() {
    png_destroy_write_struct(&png_, &info_);
    std::free(sink_.data);
  }
  PngWriter(const PngWriter&) = delete;
  PngWriter& operator=(const PngWriter&) = delete;

  std::vector<std::uint8_t> encode(const cv::Mat& image, const PngEncodeOptions& options) {
    std::vector<png_bytep> rows(static_cast<std::size_t>(image.rows));
    for (int y = 0; y < image.rows; ++y)
      rows[static_cast<std::size_t>(y)] = const_cast<png_bytep>(image.ptr<png_byte>(y));
    if (!write_png(png_, info_, rows.data(), image.cols, image.rows, &options))
      throw Error(std::string("PNG encoding failed: ") + error_.message);
    return std::vector<std::uint8_t>(sink_.data, sink_.data + sink_.size);
  }

 private:
  PngError error_;
  PngSink sink_{nullptr, 0, 0};
  png_structp png_ = nullptr;
  png_infop info_ = nullptr;
};

}  // namespace

std::vector<std::uint8_t> encode_png(const cv::Mat& image, const PngEncodeOptions& options) {
  if (image.type() != CV_8UC3 || image.empty()) throw Error("encode_png needs a non-empty CV_8UC3 image");
  PngWriter writer;
  return writer.encode(image, options);
}

}  // namespace shoplens
