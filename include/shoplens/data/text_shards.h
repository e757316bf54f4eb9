// The tokenized text shard format (docs/TEXT.md), after Megatron-LM's indexed dataset (.bin/.idx):
// one flat file of token ids per shard plus a fixed-size binary index of offsets, both memory
// mapped, so reading an example is a pointer lookup and a copy, with no per-sample parsing. On the
// shard core (shard_core.h), like the image format:
//   <name>.tokens  token ids back to back, little-endian, uint16 or int32, unpadded
//   <name>.tidx    the 40-byte common header, 8 more bytes, and one 88-byte entry per example
// Plain C++ (no torch).
#pragma once

#include "shoplens/data/sample_source.h"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "shoplens/data/manifest.h"
#include "shoplens/data/shard_core.h"

namespace shoplens {

enum class TokenDtype : std::uint8_t { kUInt16 = 1, kInt32 = 2 };
// uint16 when every id fits, else int32.
TokenDtype token_dtype_for(int vocab_size);
std::size_t token_dtype_size(TokenDtype dtype);

constexpr int kTextMaxCategorical = 8;
constexpr int kTextMaxNumeric = 8;
extern const ShardFormat kTextShardFormat;

#pragma pack(push, 1)
struct TextIndexHeader {
  ShardIndexPrefix prefix;       // payload_size: tokens; the file holds payload_size * dtype size bytes
  std::uint8_t token_dtype;      // TokenDtype
  std::uint8_t num_categorical;  // slots in use, <= kTextMaxCategorical
  std::uint8_t num_numeric;      // slots in use, <= kTextMaxNumeric
  std::uint8_t reserved[5];
};

struct TextIndexEntry {
  std::uint64_t sample_id;
  std::uint64_t offset;     // in tokens, not bytes
  std::uint32_t length;     // tokens
  std::int32_t label;       // 0 or 1
  std::int64_t created_at;  // unix seconds
  std::uint32_t shard_id;   // the source's shard (a split key of the input)
  std::uint8_t split;       // Split
  std::uint8_t reserved[3];
  std::uint16_t categorical[kTextMaxCategorical];  // 0 = missing, k = vocabulary[k-1]; unused slots 0
  float numeric[kTextMaxNumeric];                  // NaN = missing; unused slots 0
};
#pragma pack(pop)
static_assert(sizeof(TextIndexHeader) == 48, "text index header layout");
static_assert(sizeof(TextIndexEntry) == 88, "text index entry layout");
inline ShardIndexPrefix& prefix_of(TextIndexHeader& header) { return header.prefix; }
inline const ShardIndexPrefix& prefix_of(const TextIndexHeader& header) { return header.prefix; }

struct TextShardIndex {
  TextIndexHeader header{};
  std::vector<TextIndexEntry> entries;
};

// Validates and decodes a .tidx file's bytes: magic, version, sizes, the entries checksum, that
// examples are contiguous, non-empty and inside the token count, label in {0,1} (unlabelled -1 is
// rejected), split, and unused slots. With `categorical_vocab_sizes` (one per field) the header's
// field count must match and every code must be <= its vocabulary size. Throws DataError naming
// `name` and the entry.
TextShardIndex parse_text_shard_index(const std::uint8_t* bytes, std::size_t size, const std::string& name,
                                      const std::vector<int>& categorical_vocab_sizes = {});

struct TextExample {
  std::uint64_t sample_id = 0;
  std::vector<std::int32_t> tokens;
  int label = 0;
  Split split = Split::kTrain;
  std::vector<std::uint16_t> categorical;  // 0 = missing
  std::vector<float> numeric;              // NaN = missing
  std::uint32_t shard_id = 0;
  std::int64_t created_at = 0;
};

struct TextShardLayout {
  int vocab_size = 0;
  int num_categorical = 0;
  int num_numeric = 0;
};

class TextShardWriter {
 public:
  TextShardWriter(const std::filesystem::path& dir, const std::string& name, Split split,
                  const TextShardLayout& layout);
  // Throws Error for an example that does not fit the layout (token id, label, field counts).
  void add(const TextExample& example);
  // Commits the tokens file, then the index (the index's presence marks the shard complete).
  ShardListing finish();
  std::size_t count() const { return entries_.size(); }

 private:
  ShardFileWriter files_;
  TextShardLayout layout_;
  TokenDtype dtype_;
  std::vector<TextIndexEntry> entries_;
  std::vector<std::uint8_t> buffer_;
};

struct CategoricalField {
  std::string name;
  std::vector<std::string> vocabulary;  // code k means vocabulary[k-1]
};

// How examples were assigned to splits: by time. created_at < val_from: train;
// val_from <= created_at < test_from: val; created_at >= test_from: test.
struct TextSplitRule {
  std::string key = "created_at";
  std::int64_t val_from = 0;
  std::int64_t test_from = 0;
  std::string description;
};

// Contents of text_dataset.json.
struct TextDatasetInfo {
  int format_version = 1;
  int vocab_size = 0;
  int max_length = 0;
  int pad_id = 0;
  int cls_id = 1;  // the generator starts every example with it; the reader does not require it
  std::vector<CategoricalField> categorical;
  std::vector<std::string> numeric;
  TextSplitRule split_rule;
  std::vector<ShardListing> shards;
  TextShardLayout layout() const {
    return {vocab_size, static_cast<int>(categorical.size()), static_cast<int>(numeric.size())};
  }
};

// DataError naming the file and the key.
TextDatasetInfo read_text_dataset_info(const std::filesystem::path& dir);
void write_text_dataset_info(const std::filesystem::path& dir, const TextDatasetInfo& info);

// The training-side view of one split; what the text loader reads. Const and read-only: safe to
// call from several loader threads at once.
class TextSource : public SampleSource {
 public:
  int num_classes() const override { return 2; }
  std::size_t size() const override = 0;
  int label(std::size_t i) const override = 0;  // 0 or 1
  std::uint64_t sample_id(std::size_t i) const override = 0;
  virtual std::uint32_t length(std::size_t i) const = 0;  // stored tokens (before any truncation)
  // Copies the first min(length, max_len) tokens as int64 into out; returns the count copied.
  virtual std::size_t copy_tokens(std::size_t i, std::int64_t* out, std::size_t max_len) const = 0;
  // categorical codes (0 = missing) into categorical[0..num_categorical), numeric values
  // (NaN = missing) into numeric[0..num_numeric)
  virtual void metadata(std::size_t i, std::int64_t* categorical, float* numeric) const = 0;
  virtual int num_categorical() const = 0;
  virtual int num_numeric() const = 0;
  virtual std::vector<int> categorical_cardinalities() const = 0;  // vocabulary size + 1 ("missing") per field
  virtual int vocab_size() const = 0;
};

// For tests without files. Field counts and cardinalities are fixed at construction.
class InMemoryTextSource : public TextSource {
 public:
  InMemoryTextSource(int vocab_size, std::vector<int> categorical_vocab_sizes, int num_numeric);
  // Throws Error for an example that does not match the layout.
  void add(TextExample example);
  std::size_t size() const override { return examples_.size(); }
  int label(std::size_t i) const override { return examples_.at(i).label; }
  std::uint64_t sample_id(std::size_t i) const override { return examples_.at(i).sample_id; }
  std::uint32_t length(std::size_t i) const override {
    return static_cast<std::uint32_t>(examples_.at(i).tokens.size());
  }
  std::size_t copy_tokens(std::size_t i, std::int64_t* out, std::size_t max_len) const override;
  void metadata(std::size_t i, std::int64_t* categorical, float* numeric) const override;
  int num_categorical() const override { return static_cast<int>(vocab_sizes_.size()); }
  int num_numeric() const override { return num_numeric_; }
  std::vector<int> categorical_cardinalities() const override;
  int vocab_size() const override { return vocab_size_; }

 private:
  int vocab_size_;
  std::vector<int> vocab_sizes_;
  int num_numeric_;
  std::vector<TextExample> examples_;
};

// One shard, memory mapped. Checks the index (and its whole-file CRC when `index_crc32` != 0)
// and the tokens file's size; `verify_tokens` also checks the tokens CRC and every id.
class TextShardReader {
 public:
  TextShardReader(const std::filesystem::path& dir, const std::string& name, const TextDatasetInfo& info,
                  std::uint32_t index_crc32, bool verify_tokens);
  ~TextShardReader();
  std::size_t size() const { return index_.entries.size(); }
  const TextIndexEntry& entry(std::size_t i) const { return index_.entries[i]; }
  const TextIndexHeader& header() const { return index_.header; }
  const ShardIndexPrefix& prefix() const { return index_.header.prefix; }
  std::size_t copy_tokens(std::size_t i, std::int64_t* out, std::size_t max_len) const;

 private:
  void check_token_ids(int vocab_size, const std::string& file) const;
  TextShardIndex index_;
  std::unique_ptr<MappedFile> tokens_;
};

// Every shard of one split of a text shard folder, memory mapped, in text_dataset.json order.
// Checks each index and its CRC; the tokens CRC is left to verify_text_shards (it reads everything).
std::shared_ptr<const TextSource> open_text_split(const std::filesystem::path& dir, Split split);

struct TextVerifyReport {
  std::size_t shards = 0;
  std::uint64_t examples = 0;
  std::uint64_t tokens = 0;
  // Files that look like shards but are not listed in text_dataset.json (e.g. a tokens file
  // whose index was never written: a torn write). They are never read.
  std::vector<std::string> unlisted_files;
};

// Checks everything: the dataset file, every listed shard's index, CRCs of both files, counts,
// and every token id against vocab_size. Throws DataError naming the file at the first problem.
TextVerifyReport verify_text_shards(const std::filesystem::path& dir);

}  // namespace shoplens
