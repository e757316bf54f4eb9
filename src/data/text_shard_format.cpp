// The .tidx parser: pure over bytes (no files, no allocation beyond the entries), so it is fuzzed
// on its own (tests/fuzz/fuzz_text_shard_index.cpp).
#include <cmath>
#include <cstring>
#include <functional>

#include "shard_index_reader.h"
#include "shoplens/core/errors.h"
#include "shoplens/data/text_shards.h"

namespace shoplens {

const ShardFormat kTextShardFormat = {
    "text shard index",                        // index_kind
    {'S', 'L', 'T', 'X', 'I', 'D', 'X', '1'},  // magic
    1,                                         // version
    ".tokens",                                 // payload_ext
    ".tidx",                                   // index_ext
    "tokens file",                             // payload_file
    "tokens",                                  // payload_unit
    "text_dataset.json",                       // dataset_file
    "tokens",                                  // size_key
    "tokens_crc32",                            // crc_key
};

TokenDtype token_dtype_for(int vocab_size) { return vocab_size <= 65536 ? TokenDtype::kUInt16 : TokenDtype::kInt32; }

std::size_t token_dtype_size(TokenDtype dtype) { return dtype == TokenDtype::kUInt16 ? 2 : 4; }

namespace {

using Fail = std::function<DataError(const std::string&)>;

void check_text_header(const TextIndexHeader& h, const std::vector<int>& categorical_vocab_sizes, const Fail& fail) {
  if (h.token_dtype != static_cast<std::uint8_t>(TokenDtype::kUInt16) &&
      h.token_dtype != static_cast<std::uint8_t>(TokenDtype::kInt32))
    throw fail("unknown token dtype " + std::to_string(h.token_dtype));
  if (h.num_categorical > kTextMaxCategorical || h.num_numeric > kTextMaxNumeric)
    throw fail("too many metadata fields (" + std::to_string(h.num_categorical) + " categorical, " +
               std::to_string(h.num_numeric) + " numeric; at most 8 each)");
  if (!categorical_vocab_sizes.empty() && categorical_vocab_sizes.size() != h.num_categorical)
    throw fail("holds " + std::to_string(h.num_categorical) + " categorical fields, the dataset declares " +
               std::to_string(categorical_vocab_sizes.size()));
  // Token offsets are later turned into byte offsets: keep them far from overflowing.
  if (h.prefix.payload_size > (std::uint64_t{1} << 60))
    throw fail("token count " + std::to_string(h.prefix.payload_size) + " is absurd");
}

void check_text_metadata(const TextIndexEntry& e, const TextIndexHeader& h,
                         const std::vector<int>& categorical_vocab_sizes, const std::string& where, const Fail& fail) {
  for (int k = 0; k < kTextMaxCategorical; ++k) {
    const int code = e.categorical[k];
    if (k >= h.num_categorical) {
      if (code != 0) throw fail(where + "unused categorical slot " + std::to_string(k) + " is not 0");
    } else if (!categorical_vocab_sizes.empty() && code > categorical_vocab_sizes[k]) {
      throw fail(where + "categorical field " + std::to_string(k) + " has code " + std::to_string(code) +
                 " beyond its vocabulary of " + std::to_string(categorical_vocab_sizes[k]));
    }
  }
  for (int k = 0; k < h.num_numeric; ++k)
    if (std::isinf(e.numeric[k])) throw fail(where + "numeric field " + std::to_string(k) + " is infinite");
}

}  // namespace

TextShardIndex parse_text_shard_index(const std::uint8_t* bytes, std::size_t size, const std::string& name,
                                      const std::vector<int>& categorical_vocab_sizes) {
  const Fail fail = [&](const std::string& why) { return DataError(name + ": invalid text shard index: " + why); };
  TextShardIndex index;
  index.entries = read_shard_index<TextIndexHeader, TextIndexEntry>(bytes, size, kTextShardFormat, index.header, fail);
  const auto& h = index.header;
  check_text_header(h, categorical_vocab_sizes, fail);
  check_record_extents(index.entries, h.prefix.payload_size, kTextShardFormat, fail);
  for (std::size_t i = 0; i < index.entries.size(); ++i) {
    const auto& e = index.entries[i];
    const std::string where = entry_place(i, e);
    if (e.label == -1) throw fail(where + "unlabelled example (label -1) in a training shard");
    if (e.label != 0 && e.label != 1) throw fail(where + "label " + std::to_string(e.label) + " is not 0 or 1");
    check_text_metadata(e, h, categorical_vocab_sizes, where, fail);
  }
  return index;
}

}  // namespace shoplens
