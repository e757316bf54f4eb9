// libFuzzer target: the manifest parser must turn any bytes into records, rejects or a DataError,
// never a crash, hang or out-of-bounds read.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "shoplens/core/errors.h"
#include "shoplens/data/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  shoplens::ManifestOptions options;
  options.root = "/data";
  // The first byte picks a variant so column mapping and fixed class lists are fuzzed too.
  if (size > 0 && (data[0] & 1)) options.columns = {{"path", "file"}, {"label", "class"}};
  if (size > 0 && (data[0] & 2)) options.classes = {"good_image", "blurry"};
  try {
    auto m = shoplens::parse_manifest(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.csv", options);
    if (m.records.size() + m.rejected.size() != m.total_rows()) __builtin_trap();
    for (const auto& r : m.records)
      if (r.label < 0 || static_cast<std::size_t>(r.label) >= m.classes.size()) __builtin_trap();
  } catch (const shoplens::DataError&) {}
  return 0;
}
