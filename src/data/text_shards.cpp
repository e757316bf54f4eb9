#include "shoplens/data/text_shards.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "shoplens/core/errors.h"
#include "shoplens/data/shard_format.h"
#include "shoplens/data/shards.h"

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

TextShardWriter::TextShardWriter(const fs::path& dir, std::string name, Split split, const TextShardLayout& layout)
    : dir_(dir), layout_(layout), dtype_(token_dtype_for(layout.vocab_size)), tokens_(dir / (name + ".tokens")) {
  if (layout.vocab_size < 2 || layout.num_categorical < 0 || layout.num_categorical > kTextMaxCategorical ||
      layout.num_numeric < 0 || layout.num_numeric > kTextMaxNumeric)
    throw Error("text shard '" + name + "': unsupported layout (vocab " + std::to_string(layout.vocab_size) + ", " +
                std::to_string(layout.num_categorical) + " categorical, " + std::to_string(layout.num_numeric) +
                " numeric fields)");
  info_.name = std::move(name);
  info_.split = split;
}

void TextShardWriter::add(const TextExample& ex) {
  check_example(ex, layout_, info_.name);
  if (ex.split != info_.split)
    throw Error(info_.name + ": sample " + std::to_string(ex.sample_id) + " belongs to split " + split_name(ex.split));
  TextIndexEntry e{};
  e.sample_id = ex.sample_id;
  e.offset = info_.tokens;
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
  tokens_.write(buffer_.data(), buffer_.size());
  info_.tokens_crc32 = crc32_of(buffer_.data(), buffer_.size(), info_.tokens_crc32);
  info_.tokens += ex.tokens.size();
  entries_.push_back(e);
}

TextShardInfo TextShardWriter::finish() {
  tokens_.commit();
  TextIndexHeader h{};
  std::memcpy(h.magic, kTextIndexMagic, sizeof h.magic);
  h.version = kTextIndexVersion;
  h.entry_size = sizeof(TextIndexEntry);
  h.count = entries_.size();
  h.total_tokens = info_.tokens;
  h.tokens_crc32 = info_.tokens_crc32;
  h.entries_crc32 = crc32_of(entries_.data(), entries_.size() * sizeof(TextIndexEntry));
  h.token_dtype = static_cast<std::uint8_t>(dtype_);
  h.num_categorical = static_cast<std::uint8_t>(layout_.num_categorical);
  h.num_numeric = static_cast<std::uint8_t>(layout_.num_numeric);
  std::string bytes(reinterpret_cast<const char*>(&h), sizeof h);
  bytes.append(reinterpret_cast<const char*>(entries_.data()), entries_.size() * sizeof(TextIndexEntry));
  write_file_atomic(dir_ / (info_.name + ".tidx"), bytes);
  info_.count = entries_.size();
  info_.index_crc32 = crc32_of(bytes.data(), bytes.size());
  return info_;
}

// ---- text_dataset.json ----

namespace {

template <class T>
T required(const nlohmann::json& doc, const char* key, const std::string& file, const std::string& context = "") {
  const std::string where = file + ": " + (context.empty() ? "" : context + ": ");
  if (!doc.is_object() || !doc.contains(key)) throw DataError(where + "missing key '" + key + "'");
  try {
    return doc.at(key).get<T>();
  } catch (const nlohmann::json::exception& e) {
    throw DataError(where + "key '" + key + "': " + e.what());
  }
}

}  // namespace

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
  doc["shards"] = nlohmann::json::array();
  for (const auto& s : info.shards)
    doc["shards"].push_back({{"name", s.name},
                             {"split", split_name(s.split)},
                             {"count", s.count},
                             {"tokens", s.tokens},
                             {"tokens_crc32", s.tokens_crc32},
                             {"index_crc32", s.index_crc32}});
  write_file_atomic(dir / kTextDatasetFile, doc.dump(2) + "\n");
}

TextDatasetInfo read_text_dataset_info(const fs::path& dir) {
  const fs::path path = dir / kTextDatasetFile;
  const std::string file = path.string();
  if (!fs::exists(path))
    throw DataError("'" + dir.string() + "' is not a text shard folder (no " + kTextDatasetFile +
                    "; run 'shoplens make-data --task text' or tools/text_shards/to_text_shards.py)");
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::parse_error& e) {
    throw DataError(file + ": " + e.what());
  }
  TextDatasetInfo info;
  info.format_version = required<int>(doc, "format_version", file);
  if (info.format_version != 1)
    throw DataError(file + ": key 'format_version': " + std::to_string(info.format_version) +
                    " is not supported (expected 1)");
  info.vocab_size = required<int>(doc, "vocab_size", file);
  if (info.vocab_size < 2) throw DataError(file + ": key 'vocab_size': must be at least 2");
  info.max_length = required<int>(doc, "max_length", file);
  if (info.max_length < 1) throw DataError(file + ": key 'max_length': must be positive");
  info.pad_id = required<int>(doc, "pad_id", file);
  info.cls_id = required<int>(doc, "cls_id", file);
  for (const char* key : {"pad_id", "cls_id"}) {
    const int v = std::string(key) == "pad_id" ? info.pad_id : info.cls_id;
    if (v < 0 || v >= info.vocab_size) throw DataError(file + ": key '" + key + "': outside the vocabulary");
  }
  const auto meta = required<nlohmann::json>(doc, "metadata", file);
  for (const auto& f : required<nlohmann::json>(meta, "categorical", file, "metadata")) {
    CategoricalField field;
    field.name = required<std::string>(f, "name", file, "metadata.categorical");
    field.vocabulary = required<std::vector<std::string>>(f, "vocabulary", file, "metadata.categorical." + field.name);
    if (field.vocabulary.size() >= 65536)
      throw DataError(file + ": key 'metadata.categorical." + field.name + ".vocabulary': more than 65535 values");
    info.categorical.push_back(std::move(field));
  }
  info.numeric = required<std::vector<std::string>>(meta, "numeric", file, "metadata");
  if (info.categorical.size() > static_cast<std::size_t>(kTextMaxCategorical) ||
      info.numeric.size() > static_cast<std::size_t>(kTextMaxNumeric))
    throw DataError(file + ": key 'metadata': at most 8 categorical and 8 numeric fields");
  const auto rule = required<nlohmann::json>(doc, "split_rule", file);
  info.split_rule.key = required<std::string>(rule, "key", file, "split_rule");
  info.split_rule.val_from = required<std::int64_t>(rule, "val_from", file, "split_rule");
  info.split_rule.test_from = required<std::int64_t>(rule, "test_from", file, "split_rule");
  if (rule.contains("description"))
    info.split_rule.description = required<std::string>(rule, "description", file, "split_rule");
  std::set<std::string> names;
  for (const auto& s : required<nlohmann::json>(doc, "shards", file)) {
    TextShardInfo shard;
    shard.name = required<std::string>(s, "name", file, "shards");
    const std::string ctx = "shards." + shard.name;
    auto split = parse_split(required<std::string>(s, "split", file, ctx));
    if (!split) throw DataError(file + ": " + ctx + ": key 'split': unknown split");
    shard.split = *split;
    shard.count = required<std::uint64_t>(s, "count", file, ctx);
    shard.tokens = required<std::uint64_t>(s, "tokens", file, ctx);
    shard.tokens_crc32 = required<std::uint32_t>(s, "tokens_crc32", file, ctx);
    shard.index_crc32 = required<std::uint32_t>(s, "index_crc32", file, ctx);
    if (shard.name.empty() || shard.name.find('/') != std::string::npos || shard.name.find("..") != std::string::npos)
      throw DataError(file + ": shard name '" + shard.name + "' is not a plain file name");
    if (!names.insert(shard.name).second) throw DataError(file + ": shard '" + shard.name + "' is listed twice");
    info.shards.push_back(shard);
  }
  return info;
}

// ---- reading ----

TextShardReader::TextShardReader(const fs::path& dir, const std::string& name, const TextDatasetInfo& info,
                                 std::uint32_t index_crc32, bool verify_tokens) {
  const fs::path idx = dir / (name + ".tidx"), tok = dir / (name + ".tokens");
  if (!fs::exists(idx))
    throw DataError(idx.string() + ": index missing (the shard was never completed: a torn write; regenerate it)");
  MappedFile index_file(idx);
  if (index_crc32 != 0 && crc32_of(index_file.data(), index_file.size()) != index_crc32)
    throw DataError(idx.string() + ": checksum does not match " + kTextDatasetFile + " (corrupted or replaced index)");
  std::vector<int> vocab_sizes;
  for (const auto& f : info.categorical) vocab_sizes.push_back(static_cast<int>(f.vocabulary.size()));
  index_ = parse_text_shard_index(index_file.data(), index_file.size(), idx.string(), vocab_sizes);
  const auto& h = index_.header;
  if (h.num_numeric != info.numeric.size())
    throw DataError(idx.string() + ": holds " + std::to_string(h.num_numeric) +
                    " numeric fields, the dataset declares " + std::to_string(info.numeric.size()));
  if (static_cast<TokenDtype>(h.token_dtype) == TokenDtype::kUInt16 && info.vocab_size > 65536)
    throw DataError(idx.string() + ": uint16 tokens cannot hold a vocabulary of " + std::to_string(info.vocab_size));
  const std::uint64_t bytes = h.total_tokens * token_dtype_size(static_cast<TokenDtype>(h.token_dtype));
  if (!fs::exists(tok)) throw DataError(tok.string() + ": tokens file missing (its index exists)");
  tokens_ = std::make_unique<MappedFile>(tok);
  if (tokens_->size() != bytes)
    throw DataError(tok.string() + ": size " + std::to_string(tokens_->size()) + " does not match its index (" +
                    std::to_string(bytes) + " bytes)");
  if (!verify_tokens) return;
  if (crc32_of(tokens_->data(), tokens_->size()) != h.tokens_crc32)
    throw DataError(tok.string() + ": checksum mismatch (corrupted tokens file)");
  std::vector<std::int64_t> buf;
  for (std::size_t i = 0; i < size(); ++i) {
    buf.resize(index_.entries[i].length);
    copy_tokens(i, buf.data(), buf.size());
    for (auto t : buf)
      if (t < 0 || t >= info.vocab_size)
        throw DataError(tok.string() + ": entry " + std::to_string(i) + " (sample " +
                        std::to_string(index_.entries[i].sample_id) + "): token id " + std::to_string(t) +
                        " outside the vocabulary of " + std::to_string(info.vocab_size));
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
  void add_reader(std::unique_ptr<TextShardReader> reader) {
    const auto r = static_cast<std::uint32_t>(readers_.size());
    for (std::size_t i = 0; i < reader->size(); ++i) locations_.emplace_back(r, static_cast<std::uint32_t>(i));
    readers_.push_back(std::move(reader));
  }
  std::size_t size() const override { return locations_.size(); }
  int label(std::size_t i) const override { return entry(i).label; }
  std::uint64_t sample_id(std::size_t i) const override { return entry(i).sample_id; }
  std::uint32_t length(std::size_t i) const override { return entry(i).length; }
  std::size_t copy_tokens(std::size_t i, std::int64_t* out, std::size_t max_len) const override {
    const auto& [r, k] = locations_.at(i);
    return readers_[r]->copy_tokens(k, out, max_len);
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
  const TextIndexEntry& entry(std::size_t i) const {
    const auto& [r, k] = locations_.at(i);
    return readers_[r]->entry(k);
  }
  TextDatasetInfo info_;
  std::vector<std::unique_ptr<TextShardReader>> readers_;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> locations_;  // (reader, entry)
};

std::unique_ptr<TextShardReader> open_listed_shard(const fs::path& dir, const TextDatasetInfo& info,
                                                   const TextShardInfo& shard, bool verify_tokens) {
  auto reader = std::make_unique<TextShardReader>(dir, shard.name, info, shard.index_crc32, verify_tokens);
  const std::string idx = (dir / (shard.name + ".tidx")).string();
  if (reader->size() != shard.count)
    throw DataError(idx + ": holds " + std::to_string(reader->size()) + " examples but " + kTextDatasetFile + " says " +
                    std::to_string(shard.count));
  if (reader->header().total_tokens != shard.tokens)
    throw DataError(idx + ": holds " + std::to_string(reader->header().total_tokens) + " tokens but " +
                    kTextDatasetFile + " says " + std::to_string(shard.tokens));
  for (std::size_t i = 0; i < reader->size(); ++i)
    if (reader->entry(i).split != static_cast<std::uint8_t>(shard.split))
      throw DataError(idx + ": entry " + std::to_string(i) + " is in another split than its shard (" +
                      split_name(shard.split) + ")");
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
  std::set<std::string> listed;
  for (const auto& shard : info.shards) {
    auto reader = open_listed_shard(dir, info, shard, /*verify_tokens=*/true);
    if (reader->header().tokens_crc32 != shard.tokens_crc32)
      throw DataError((dir / (shard.name + ".tidx")).string() + ": tokens checksum differs from " + kTextDatasetFile);
    report.shards++;
    report.examples += reader->size();
    report.tokens += reader->header().total_tokens;
    listed.insert(shard.name + ".tokens");
    listed.insert(shard.name + ".tidx");
  }
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string file = entry.path().filename().string();
    const std::string ext = entry.path().extension().string();
    if ((ext == ".tokens" || ext == ".tidx") && !listed.count(file)) report.unlisted_files.push_back(file);
  }
  std::sort(report.unlisted_files.begin(), report.unlisted_files.end());
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
