#include "shoplens/data/text_shards.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dataset_json.h"
#include "shoplens/core/errors.h"

namespace shoplens {

namespace fs = std::filesystem;

namespace {

void check_example(const TextExample& ex, const TextShardLayout& layout, const std::string& where) {
  auto fail = [&](const std::string& why) {
    return Error(where + ": sample " + std::to_string(ex.sample_id) + ": " + why);
  };
  if (ex.tokens.empty()) throw fail("no tokens");
  if (ex.tokens.size() > std::numeric_limits<std::uint32_t>::max()) throw fail("too many tokens");
  for (auto t : ex.tokens)
    if (t < 0 || t >= layout.vocab_size)
      throw fail("token id " + std::to_string(t) + " outside the vocabulary of " + std::to_string(layout.vocab_size));
  if (ex.label != 0 && ex.label != 1) throw fail("label " + std::to_string(ex.label) + " is not 0 or 1");
  if (static_cast<int>(ex.categorical.size()) != layout.num_categorical ||
      static_cast<int>(ex.numeric.size()) != layout.num_numeric)
    throw fail("metadata field counts do not match the dataset");
}

}  // namespace

TextShardWriter::TextShardWriter(const fs::path& dir, const std::string& name, Split split,
                                 const TextShardLayout& layout)
    : files_(dir, name, split, kTextShardFormat), layout_(layout), dtype_(token_dtype_for(layout.vocab_size)) {
  if (layout.vocab_size < 2 || layout.num_categorical < 0 || layout.num_categorical > kTextMaxCategorical ||
      layout.num_numeric < 0 || layout.num_numeric > kTextMaxNumeric)
    throw Error("text shard '" + name + "': unsupported layout (vocab " + std::to_string(layout.vocab_size) + ", " +
                std::to_string(layout.num_categorical) + " categorical, " + std::to_string(layout.num_numeric) +
                " numeric fields)");
}

void TextShardWriter::add(const TextExample& ex) {
  const ShardListing& listing = files_.listing();
  check_example(ex, layout_, listing.name);
  if (ex.split != listing.split)
    throw Error(listing.name + ": sample " + std::to_string(ex.sample_id) + " belongs to split " +
                split_name(ex.split));
  TextIndexEntry e{};
  e.sample_id = ex.sample_id;
  e.offset = listing.payload_size;
  e.length = static_cast<std::uint32_t>(ex.tokens.size());
  e.label = ex.label;
  e.created_at = ex.created_at;
  e.shard_id = ex.shard_id;
  e.split = static_cast<std::uint8_t>(ex.split);
  std::copy(ex.categorical.begin(), ex.categorical.end(), e.categorical);
  std::copy(ex.numeric.begin(), ex.numeric.end(), e.numeric);

  // Little-endian by construction, whatever the host.
  const std::size_t width = token_dtype_size(dtype_);
  buffer_.resize(ex.tokens.size() * width);
  for (std::size_t i = 0; i < ex.tokens.size(); ++i) {
    const auto v = static_cast<std::uint32_t>(ex.tokens[i]);
    for (std::size_t b = 0; b < width; ++b) buffer_[i * width + b] = static_cast<std::uint8_t>(v >> (8 * b));
  }
  files_.append(buffer_.data(), buffer_.size(), ex.tokens.size());
  entries_.push_back(e);
}

ShardListing TextShardWriter::finish() {
  TextIndexHeader h{};
  h.token_dtype = static_cast<std::uint8_t>(dtype_);
  h.num_categorical = static_cast<std::uint8_t>(layout_.num_categorical);
  h.num_numeric = static_cast<std::uint8_t>(layout_.num_numeric);
  return files_.finish(h, entries_);
}

// ---- text_dataset.json ----

void write_text_dataset_info(const fs::path& dir, const TextDatasetInfo& info) {
  nlohmann::json doc;
  doc["format"] = "shoplens-text-shards";
  doc["format_version"] = info.format_version;
  doc["vocab_size"] = info.vocab_size;
  doc["max_length"] = info.max_length;
  doc["pad_id"] = info.pad_id;
  doc["cls_id"] = info.cls_id;
  doc["token_dtype"] = token_dtype_for(info.vocab_size) == TokenDtype::kUInt16 ? "uint16" : "int32";
  nlohmann::json cat = nlohmann::json::array();
  for (const auto& f : info.categorical) cat.push_back({{"name", f.name}, {"vocabulary", f.vocabulary}});
  doc["metadata"] = {{"categorical", cat}, {"numeric", info.numeric}};
  doc["split_rule"] = {{"key", info.split_rule.key},
                       {"val_from", info.split_rule.val_from},
                       {"test_from", info.split_rule.test_from},
                       {"description", info.split_rule.description}};
  doc["shards"] = listings_to_json(info.shards, kTextShardFormat);
  write_file_atomic(dir / kTextShardFormat.dataset_file, doc.dump(2) + "\n");
}

namespace {

// text_dataset.json's "metadata": the categorical fields with their vocabularies, the numeric names.
void read_text_metadata(const DatasetFields& meta, TextDatasetInfo& info) {
  meta.check_keys({"categorical", "numeric"});
  const std::size_t count = meta.list("categorical").size();
  for (std::size_t i = 0; i < count; ++i) {
    const DatasetFields f = meta.element("categorical", i);
    CategoricalField field;
    field.name = f.get<std::string>("name");
    field.vocabulary = f.get<std::vector<std::string>>("vocabulary");
    if (field.vocabulary.size() >= 65536) f.fail("vocabulary", "more than 65535 values");
    info.categorical.push_back(std::move(field));
  }
  info.numeric = meta.get<std::vector<std::string>>("numeric");
  if (info.categorical.size() > static_cast<std::size_t>(kTextMaxCategorical) ||
      info.numeric.size() > static_cast<std::size_t>(kTextMaxNumeric))
    meta.fail(
        fmt::format("metadata: at most {} categorical and {} numeric fields", kTextMaxCategorical, kTextMaxNumeric));
}

}  // namespace

TextDatasetInfo read_text_dataset_info(const fs::path& dir) {
  const fs::path path = dir / kTextShardFormat.dataset_file;
  const std::string file = path.string();
  if (!fs::exists(path))
    throw DataError("'" + dir.string() + "' is not a text shard folder (no " + kTextShardFormat.dataset_file +
                    "; run 'shoplens make-data --task text' or tools/text_shards/to_text_shards.py)");
  const nlohmann::json doc = read_json_document(path);
  const DatasetFields fields(doc, file);
  // "source": what tools/text_shards/to_text_shards.py converted (its inputs and counts).
  fields.check_keys({"format", "format_version", "vocab_size", "max_length", "pad_id", "cls_id", "token_dtype",
                     "metadata", "split_rule", "shards", "source"});
  TextDatasetInfo info;
  info.format_version = fields.get<int>("format_version");
  if (info.format_version != 1)
    fields.fail("format_version", std::to_string(info.format_version) + " is not supported (expected 1)");
  info.vocab_size = static_cast<int>(fields.integer("vocab_size", 2, INT32_MAX));
  info.max_length = static_cast<int>(fields.integer("max_length", 1, INT32_MAX));
  // Token ids inside the vocabulary.
  info.pad_id = static_cast<int>(fields.integer("pad_id", 0, info.vocab_size - 1));
  info.cls_id = static_cast<int>(fields.integer("cls_id", 0, info.vocab_size - 1));
  read_text_metadata(fields.section("metadata"), info);
  const DatasetFields rule = fields.section("split_rule");
  rule.check_keys({"key", "val_from", "test_from", "description"});
  info.split_rule.key = rule.get<std::string>("key");
  info.split_rule.val_from = rule.get<std::int64_t>("val_from");
  info.split_rule.test_from = rule.get<std::int64_t>("test_from");
  info.split_rule.description = rule.get_or<std::string>("description", "");
  info.shards = read_listings(fields, kTextShardFormat);
  return info;
}

// ---- reading ----

namespace {

void check_header_fits(const TextIndexHeader& h, const TextDatasetInfo& info, const std::string& index) {
  if (h.num_numeric != info.numeric.size())
    throw DataError(index + ": holds " + std::to_string(h.num_numeric) + " numeric fields, the dataset declares " +
                    std::to_string(info.numeric.size()));
  if (static_cast<TokenDtype>(h.token_dtype) == TokenDtype::kUInt16 && info.vocab_size > 65536)
    throw DataError(index + ": uint16 tokens cannot hold a vocabulary of " + std::to_string(info.vocab_size));
}

}  // namespace

TextShardReader::TextShardReader(const fs::path& dir, const std::string& name, const TextDatasetInfo& info,
                                 std::uint32_t index_crc32, bool verify_tokens) {
  const std::string index = shard_index_path(dir, name, kTextShardFormat).string();
  const auto index_file = map_shard_index(dir, name, kTextShardFormat, index_crc32);
  std::vector<int> vocab_sizes;
  for (const auto& f : info.categorical) vocab_sizes.push_back(static_cast<int>(f.vocabulary.size()));
  index_ = parse_text_shard_index(index_file->data(), index_file->size(), index, vocab_sizes);
  const auto& h = index_.header;
  check_header_fits(h, info, index);
  const std::uint64_t bytes = h.prefix.payload_size * token_dtype_size(static_cast<TokenDtype>(h.token_dtype));
  tokens_ = map_shard_payload(dir, name, kTextShardFormat, bytes, h.prefix.payload_crc32, verify_tokens);
  if (verify_tokens) check_token_ids(info.vocab_size, shard_payload_path(dir, name, kTextShardFormat).string());
}

void TextShardReader::check_token_ids(int vocab_size, const std::string& file) const {
  std::vector<std::int64_t> buf;
  for (std::size_t i = 0; i < size(); ++i) {
    buf.resize(index_.entries[i].length);
    copy_tokens(i, buf.data(), buf.size());
    for (auto t : buf)
      if (t < 0 || t >= vocab_size)
        throw DataError(file + ": entry " + std::to_string(i) + " (sample " +
                        std::to_string(index_.entries[i].sample_id) + "): token id " + std::to_string(t) +
                        " outside the vocabulary of " + std::to_string(vocab_size));
  }
}

TextShardReader::~TextShardReader() = default;

std::size_t TextShardReader::copy_tokens(std::size_t i, std::int64_t* out, std::size_t max_len) const {
  const auto& e = index_.entries[i];
  const std::size_t n = std::min<std::size_t>(e.length, max_len);
  if (index_.header.token_dtype == static_cast<std::uint8_t>(TokenDtype::kUInt16)) {
    const std::uint8_t* p = tokens_->data() + e.offset * 2;
    for (std::size_t k = 0; k < n; ++k) out[k] = p[2 * k] | (p[2 * k + 1] << 8);
  } else {
    const std::uint8_t* p = tokens_->data() + e.offset * 4;
    for (std::size_t k = 0; k < n; ++k) {
      const std::uint32_t v = std::uint32_t(p[4 * k]) | (std::uint32_t(p[4 * k + 1]) << 8) |
                              (std::uint32_t(p[4 * k + 2]) << 16) | (std::uint32_t(p[4 * k + 3]) << 24);
      out[k] = static_cast<std::int32_t>(v);
    }
  }
  return n;
}

namespace {

class ShardTextSource : public TextSource {
 public:
  explicit ShardTextSource(TextDatasetInfo info) : info_(std::move(info)) {}
  void add_reader(std::unique_ptr<TextShardReader> reader) { shards_.add(std::move(reader)); }
  std::size_t size() const override { return shards_.size(); }
  int label(std::size_t i) const override { return entry(i).label; }
  std::uint64_t sample_id(std::size_t i) const override { return entry(i).sample_id; }
  std::uint32_t length(std::size_t i) const override { return entry(i).length; }
  std::size_t copy_tokens(std::size_t i, std::int64_t* out, std::size_t max_len) const override {
    const auto [reader, k] = shards_.locate(i);
    return reader->copy_tokens(k, out, max_len);
  }
  void metadata(std::size_t i, std::int64_t* categorical, float* numeric) const override {
    const auto& e = entry(i);
    for (int k = 0; k < num_categorical(); ++k) categorical[k] = e.categorical[k];
    for (int k = 0; k < num_numeric(); ++k) numeric[k] = e.numeric[k];
  }
  int num_categorical() const override { return static_cast<int>(info_.categorical.size()); }
  int num_numeric() const override { return static_cast<int>(info_.numeric.size()); }
  std::vector<int> categorical_cardinalities() const override {
    std::vector<int> out;
    for (const auto& f : info_.categorical) out.push_back(static_cast<int>(f.vocabulary.size()) + 1);
    return out;
  }
  int vocab_size() const override { return info_.vocab_size; }

 private:
  const TextIndexEntry& entry(std::size_t i) const { return shards_.entry(i); }
  TextDatasetInfo info_;
  ShardTable<TextShardReader> shards_;
};

std::unique_ptr<TextShardReader> open_listed_shard(const fs::path& dir, const TextDatasetInfo& info,
                                                   const ShardListing& shard, bool verify_tokens) {
  auto reader = std::make_unique<TextShardReader>(dir, shard.name, info, shard.index_crc32, verify_tokens);
  check_listed(*reader, shard, kTextShardFormat, dir);
  return reader;
}

}  // namespace

std::shared_ptr<const TextSource> open_text_split(const fs::path& dir, Split split) {
  TextDatasetInfo info = read_text_dataset_info(dir);
  auto source = std::make_shared<ShardTextSource>(info);
  for (const auto& shard : info.shards)
    if (shard.split == split) source->add_reader(open_listed_shard(dir, info, shard, /*verify_tokens=*/false));
  return source;
}

TextVerifyReport verify_text_shards(const fs::path& dir) {
  const TextDatasetInfo info = read_text_dataset_info(dir);
  TextVerifyReport report;
  for (const auto& shard : info.shards) {
    auto reader = open_listed_shard(dir, info, shard, /*verify_tokens=*/true);
    report.shards++;
    report.examples += reader->size();
    report.tokens += reader->prefix().payload_size;
  }
  report.unlisted_files = unlisted_shard_files(dir, info.shards, kTextShardFormat);
  return report;
}

// ---- in memory ----

InMemoryTextSource::InMemoryTextSource(int vocab_size, std::vector<int> categorical_vocab_sizes, int num_numeric)
    : vocab_size_(vocab_size), vocab_sizes_(std::move(categorical_vocab_sizes)), num_numeric_(num_numeric) {}

void InMemoryTextSource::add(TextExample example) {
  check_example(example, {vocab_size_, num_categorical(), num_numeric_}, "in-memory text source");
  for (std::size_t k = 0; k < vocab_sizes_.size(); ++k)
    if (example.categorical[k] > vocab_sizes_[k])
      throw Error("in-memory text source: sample " + std::to_string(example.sample_id) +
                  ": categorical code beyond its vocabulary");
  examples_.push_back(std::move(example));
}

std::size_t InMemoryTextSource::copy_tokens(std::size_t i, std::int64_t* out, std::size_t max_len) const {
  const auto& t = examples_.at(i).tokens;
  const std::size_t n = std::min(t.size(), max_len);
  for (std::size_t k = 0; k < n; ++k) out[k] = t[k];
  return n;
}

void InMemoryTextSource::metadata(std::size_t i, std::int64_t* categorical, float* numeric) const {
  const auto& e = examples_.at(i);
  for (std::size_t k = 0; k < e.categorical.size(); ++k) categorical[k] = e.categorical[k];
  for (std::size_t k = 0; k < e.numeric.size(); ++k) numeric[k] = e.numeric[k];
}

std::vector<int> InMemoryTextSource::categorical_cardinalities() const {
  std::vector<int> out;
  for (int v : vocab_sizes_) out.push_back(v + 1);
  return out;
}

}  // namespace shoplens
