// libFuzzer target: the zip central directory reader (weights archives) must reject any malformed
// archive with a DataError, read only inside the buffer, and never report a stored entry whose
// sizes disagree once check_zip_sizes accepted it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_buffer.h"
#include "models/zip_directory.h"
#include "shoplens/core/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  const auto read_at = shoplens::fuzz::buffer_reader(bytes);
  try {
    auto entries = shoplens::detail::read_zip_directory(size, read_at, "fuzz.pt");
    shoplens::detail::check_zip_sizes(entries, size, "fuzz.pt");
    for (const auto& e : entries)
      if (e.method == 0 && e.compressed_size != e.uncompressed_size) __builtin_trap();
  } catch (const shoplens::DataError&) {}
  return 0;
}
