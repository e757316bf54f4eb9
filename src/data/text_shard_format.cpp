// The .tidx parser: pure over bytes (no files, no allocation beyond the entries), so it is fuzzed
// on its own (tests/fuzz/fuzz_text_shard_index.cpp).
#include <cmath>
#include <cstring>
#include <functional>

#include "shoplens/core/errors.h"
#include "index_entries.h"
#include "shoplens/data/shard_format.h"
#include "shoplens/data/text_shards.h"

namespace shoplens {

TokenDtype token_dtype_for(int vocab_size) { return vocab_size <= 65536 ? TokenDtype::kUInt16 : TokenDtype::kInt32; }

std::size_t token_dtype_size(TokenDtype dtype) { return dtype == TokenDtype::kUInt16 ? 2 : 4; }

namespace {

using Fail = std::function<DataError(const std::string&)>;

void check_text_header(const TextIndexHeader& h, const std::vector<int>& categorical_vocab_sizes, const Fail& fail) {
  if (std::memcmp(h.magic, kTextIndexMagic, sizeof h.magic) != 0)
    throw fail("bad magic (not a ShopLens text shard index)");
  if (h.version != kTextIndexVersion)
    throw fail("version " + std::to_string(h.version) + " is not supported (expected " +
               std::to_string(kTextIndexVersion) + ")");
  if (h.entry_size != sizeof(TextIndexEntry)) throw fail("entry size " + std::to_string(h.entry_size) + " != 88");
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
  if (h.total_tokens > (std::uint64_t{1} << 60))
    throw fail("token count " + std::to_string(h.total_tokens) + " is absurd");
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
  if (size < sizeof(TextIndexHeader))
    throw fail("file is " + std::to_string(size) + " bytes, shorter than the 48-byte header");
  std::memcpy(&index.header, bytes, sizeof(TextIndexHeader));
  const auto& h = index.header;
  check_text_header(h, categorical_vocab_sizes, fail);
  index.entries =
      read_index_entries<TextIndexEntry>(bytes, size, sizeof(TextIndexHeader), h.count, h.entries_crc32, fail);
  std::uint64_t expected_offset = 0;
  for (std::size_t i = 0; i < index.entries.size(); ++i) {
    const auto& e = index.entries[i];
    const std::string where = "entry " + std::to_string(i) + " (sample " + std::to_string(e.sample_id) + "): ";
    if (e.offset != expected_offset)
      throw fail(where + "examples must be contiguous (offset " + std::to_string(e.offset) + ", expected " +
                 std::to_string(expected_offset) + ")");
    if (e.length == 0) throw fail(where + "empty example");
    if (e.length > h.total_tokens - e.offset)
      throw fail(where + "tokens [" + std::to_string(e.offset) + ", +" + std::to_string(e.length) +
                 ") lie past the end of the tokens file (" + std::to_string(h.total_tokens) + " tokens)");
    expected_offset = e.offset + e.length;
    if (e.label == -1) throw fail(where + "unlabelled example (label -1) in a training shard");
    if (e.label != 0 && e.label != 1) throw fail(where + "label " + std::to_string(e.label) + " is not 0 or 1");
    if (e.split > 2) throw fail(where + "unknown split " + std::to_string(e.split));
    check_text_metadata(e, h, categorical_vocab_sizes, where, fail);
  }
  if (expected_offset != h.total_tokens) throw fail("examples do not cover the tokens file exactly");
  return index;
}

}  // namespace shoplens
