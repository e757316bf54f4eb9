// libFuzzer target: the shard index reader must reject any malformed index with a DataError and
// never return entries that point outside the data file.
#include <cstddef>
#include <cstdint>

#include "shoplens/core/errors.h"
#include "shoplens/data/shard_format.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    auto index = shoplens::parse_shard_index(data, size, "fuzz.idx", 12);
    for (const auto& e : index.entries)
      if (e.offset + e.length > index.header.payload_size || e.label >= 12) __builtin_trap();
  } catch (const shoplens::DataError&) {}
  return 0;
}
