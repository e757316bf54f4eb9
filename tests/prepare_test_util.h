// Helpers of the tests that build a dataset on disk and prepare it.
#pragma once

#include <filesystem>
#include <string>

#include "image_test_util.h"
#include "shoplens/core/atomic_file.h"
#include "shoplens/data/image_io.h"
#include "shoplens/data/prepare.h"

namespace shoplens::testing {

// A JPEG of test_picture(width, height, seed) at `file`, its folders made.
inline void write_picture_jpeg(const std::filesystem::path& file, int width, int height, int seed) {
  const Bytes jpeg = encode_jpeg(test_picture(width, height, seed), 85);
  std::filesystem::create_directories(file.parent_path());
  write_file_atomic(file, std::string(jpeg.begin(), jpeg.end()));
}

// Prepare's options for `manifest` into `out`: images stored at `storage_size`, `threads` decoding.
inline PrepareOptions prepare_options_for(const std::filesystem::path& manifest, const std::filesystem::path& out,
                                          int storage_size, int threads) {
  PrepareOptions o;
  o.input = manifest;
  o.out_dir = out;
  o.storage_size = storage_size;
  o.threads = threads;
  return o;
}

// "stage: reason" of the row `id` that prepare quarantined, or "<kept>".
inline std::string quarantine_reason(const PrepareReport& report, const std::string& id) {
  for (const auto& q : report.quarantined)
    if (q.id == id) return q.stage + ": " + q.reason;
  return "<kept>";
}

}  // namespace shoplens::testing
