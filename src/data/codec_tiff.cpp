// TIFF through libtiff, read from memory (TIFFClientOpenExt) into libtiff's RGBA raster, which
// covers strips and tiles, every photometric interpretation it knows, and every orientation.
// Only the first image of a multi-page file is read.
#include <tiffio.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "codecs.h"
#include "shoplens/core/errors.h"

namespace shoplens::codecs {
namespace {

// The file in memory and the first error libtiff reported about it. Plain data: libtiff calls
// into these from C.
struct TiffSource {
  const std::uint8_t* data;
  std::size_t size;
  std::uint64_t offset;
  char error[200];
};

TiffSource* source_of(thandle_t handle) { return static_cast<TiffSource*>(handle); }

tmsize_t read_proc(thandle_t handle, void* buffer, tmsize_t count) {
  TiffSource* s = source_of(handle);
  if (count < 0 || s->offset >= s->size) return 0;
  const std::size_t n = std::min<std::uint64_t>(static_cast<std::uint64_t>(count), s->size - s->offset);
  std::memcpy(buffer, s->data + s->offset, n);
  s->offset += n;
  return static_cast<tmsize_t>(n);
}

tmsize_t write_proc(thandle_t, void*, tmsize_t) { return 0; }  // opened read-only

toff_t seek_proc(thandle_t handle, toff_t offset, int whence) {
  TiffSource* s = source_of(handle);
  const std::uint64_t base = whence == SEEK_CUR ? s->offset : whence == SEEK_END ? s->size : 0;
  if (offset > UINT64_MAX - base) return static_cast<toff_t>(-1);
  s->offset = base + offset;  // past the end is allowed; reads there return nothing
  return s->offset;
}

int close_proc(thandle_t) { return 0; }
toff_t size_proc(thandle_t handle) { return source_of(handle)->size; }

// Mapping the buffer lets libtiff read uncompressed strips in place.
int map_proc(thandle_t handle, void** base, toff_t* size) {
  *base = const_cast<std::uint8_t*>(source_of(handle)->data);
  *size = source_of(handle)->size;
  return 1;
}
void unmap_proc(thandle_t, void*, toff_t) {}

// Keeps the first error as the quarantine reason; returning 1 keeps libtiff from also printing it.
int on_error(TIFF*, void* user, const char* module, const char* format, va_list args) {
  auto* s = static_cast<TiffSource*>(user);
  if (s->error[0] == '\0') std::vsnprintf(s->error, sizeof s->error, format, args);
  return 1;
}
int on_warning(TIFF*, void*, const char*, const char*, va_list) { return 1; }

// A few libtiff paths still report through the process-wide handlers, which print to stderr by
// default; the decoder never wants that.
void silence_global_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    TIFFSetErrorHandler(nullptr);
    TIFFSetWarningHandler(nullptr);
  });
}

struct TiffCloser {
  void operator()(TIFF* tif) const { TIFFClose(tif); }
};
using TiffPtr = std::unique_ptr<TIFF, TiffCloser>;

TiffPtr open_tiff(TiffSource& source) {
  silence_global_handlers();
  std::unique_ptr<TIFFOpenOptions, void (*)(TIFFOpenOptions*)> options(TIFFOpenOptionsAlloc(), TIFFOpenOptionsFree);
  if (!options) throw Error("cannot initialise libtiff");
  TIFFOpenOptionsSetErrorHandlerExtR(options.get(), on_error, &source);
  TIFFOpenOptionsSetWarningHandlerExtR(options.get(), on_warning, &source);
  TiffPtr tif(TIFFClientOpenExt("memory", "r", &source, read_proc, write_proc, seek_proc, close_proc, size_proc,
                                map_proc, unmap_proc, options.get()));
  if (!tif) throw DataError(std::string("corrupt TIFF header: ") + source.error);
  return tif;
}

std::string reason(const char* what, const TiffSource& source) {
  return std::string(what) + (source.error[0] ? std::string(": ") + source.error : std::string());
}

}  // namespace

DecodedImage decode_tiff(const std::uint8_t* data, std::size_t size, const DecodeOptions& options) {
  TiffSource source{data, size, 0, ""};
  TiffPtr tif = open_tiff(source);
  std::uint32_t width = 0, height = 0;
  if (!TIFFGetField(tif.get(), TIFFTAG_IMAGEWIDTH, &width) || !TIFFGetField(tif.get(), TIFFTAG_IMAGELENGTH, &height))
    throw DataError(reason("corrupt TIFF: no image size", source));
  check_declared_size(ImageFormat::kTiff, width, height, options);
  char why[1024] = "";
  if (!TIFFRGBAImageOK(tif.get(), why)) throw DataError(std::string("unsupported TIFF: ") + why);
  // ABGR words, one per pixel (TIFFGetR and friends unpack them), then the RGB copy beside them.
  announce_allocation(options, std::uint64_t{width} * height * (4 + 3));
  cv::Mat raster(static_cast<int>(height), static_cast<int>(width), CV_32SC1);
  if (!TIFFReadRGBAImageOriented(tif.get(), width, height, raster.ptr<std::uint32_t>(), ORIENTATION_TOPLEFT,
                                 /*stop_on_error=*/1))
    throw DataError(reason("corrupt TIFF", source));
  DecodedImage out = allocate_image(ImageFormat::kTiff, width, height);
  for (int y = 0; y < raster.rows; ++y) {
    const std::uint32_t* in = raster.ptr<std::uint32_t>(y);
    std::uint8_t* px = out.rgb.ptr<std::uint8_t>(y);
    for (int x = 0; x < raster.cols; ++x, px += 3) {
      px[0] = static_cast<std::uint8_t>(TIFFGetR(in[x]));
      px[1] = static_cast<std::uint8_t>(TIFFGetG(in[x]));
      px[2] = static_cast<std::uint8_t>(TIFFGetB(in[x]));
    }
  }
  return out;
}

}  // namespace shoplens::codecs
