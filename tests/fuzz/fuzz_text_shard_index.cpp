// libFuzzer target: the text shard index reader must reject any malformed index with a DataError
// and never return an entry that points outside the tokens file or carries a label other than 0/1.
#include <cstddef>
#include <cstdint>

#include "shoplens/core/errors.h"
#include "shoplens/data/text_shards.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    // Two categorical fields with vocabularies of 3 and 5 values, as a dataset would declare.
    auto index = shoplens::parse_text_shard_index(data, size, "fuzz.tidx", {3, 5});
    for (const auto& e : index.entries) {
      if (e.length == 0 || e.offset + e.length > index.header.prefix.payload_size) __builtin_trap();
      if (e.label != 0 && e.label != 1) __builtin_trap();
      if (e.categorical[0] > 3 || e.categorical[1] > 5 || e.split > 2) __builtin_trap();
    }
  } catch (const shoplens::DataError&) {}
  return 0;
}
