// libFuzzer target: the safetensors header reader must reject any malformed file with a
// DataError, read only inside the buffer, and only ever accept entries that tile the data
// section exactly with sizes that match their dtype and shape.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_buffer.h"
#include "models/safetensors_header.h"
#include "shoplens/core/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  const auto read_at = shoplens::fuzz::buffer_reader(bytes);
  try {
    const auto header = shoplens::detail::read_safetensors_header(size, read_at, "fuzz.safetensors");
    std::uint64_t expected = 0;
    for (const auto& e : header.entries) {
      if (e.begin != expected || e.end < e.begin) __builtin_trap();
      std::uint64_t numel = 1;
      for (auto d : e.shape) numel *= static_cast<std::uint64_t>(d);
      const auto element = shoplens::detail::safetensors_element_bytes(e.dtype);
      if (element == 0 || e.end - e.begin != numel * static_cast<std::uint64_t>(element)) __builtin_trap();
      expected = e.end;
    }
    if (header.data_start + expected != size) __builtin_trap();
  } catch (const shoplens::DataError&) {}
  return 0;
}
