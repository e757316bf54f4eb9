#include "shoplens/data/shards.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dataset_json.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/utf8.h"

namespace shoplens {

namespace fs = std::filesystem;

ShardWriter::ShardWriter(const fs::path& dir, std::string name, Split split)
    : files_(dir, std::move(name), split, kImageShardFormat) {}

void ShardWriter::add(const std::uint8_t* payload, std::size_t length, int height, int width, PayloadEncoding encoding,
                      int label, std::uint64_t sample_id, const MetadataCodes& metadata) {
  if (length == 0 || length > UINT32_MAX) throw Error("shard payload of " + std::to_string(length) + " bytes");
  if (height <= 0 || width <= 0 || height > UINT16_MAX || width > UINT16_MAX)
    throw Error("shard image size out of range: " + std::to_string(width) + "x" + std::to_string(height));
  ShardIndexEntry e{};
  e.sample_id = sample_id;
  e.offset = files_.listing().payload_size;
  e.length = static_cast<std::uint32_t>(length);
  e.height = static_cast<std::uint16_t>(height);
  e.width = static_cast<std::uint16_t>(width);
  e.channels = 3;
  e.encoding = static_cast<std::uint8_t>(encoding);
  e.split = static_cast<std::uint8_t>(files_.listing().split);
  e.label = label;
  std::copy(metadata.begin(), metadata.end(), e.metadata);
  files_.append(payload, length, length);
  entries_.push_back(e);
}

ShardListing ShardWriter::finish() { return files_.finish(ShardIndexHeader{}, entries_); }

ShardReader::ShardReader(const fs::path& dir, const std::string& name, int num_classes, bool verify_data,
                         std::uint32_t listed_index_crc32) {
  const auto index_file = map_shard_index(dir, name, kImageShardFormat, listed_index_crc32);
  index_ = parse_shard_index(index_file->data(), index_file->size(),
                             shard_index_path(dir, name, kImageShardFormat).string(), num_classes);
  const auto& h = index_.header;
  data_ = map_shard_payload(dir, name, kImageShardFormat, h.payload_size, h.payload_crc32, verify_data);
}

ShardReader::~ShardReader() = default;

const std::uint8_t* ShardReader::payload(std::size_t i) const { return data_->data() + index_.entries[i].offset; }

void write_dataset_info(const fs::path& dir, const DatasetInfo& info, const std::string& extra_json) {
  nlohmann::json doc;
  doc["format"] = "shoplens-shards";
  doc["format_version"] = 1;
  doc["classes"] = info.classes;
  doc["metadata_fields"] = info.metadata_fields;
  doc["metadata_vocabulary"] = info.metadata_vocabulary;
  doc["storage_size"] = info.storage_size;
  doc["encoding"] = info.encoding;
  doc["mean"] = info.mean;
  doc["std"] = info.std;
  doc["shards"] = listings_to_json(info.shards, kImageShardFormat);
  if (!extra_json.empty()) doc["prepare"] = nlohmann::json::parse(extra_json);
  write_file_atomic(dir / kImageShardFormat.dataset_file, dump_json_escaped(doc, 2) + "\n");
}

DatasetInfo read_dataset_info(const fs::path& dir) {
  const fs::path path = dir / kImageShardFormat.dataset_file;
  const std::string file = path.string();
  if (!fs::exists(path))
    throw DataError("'" + dir.string() + "' is not a prepared dataset (no dataset.json; run 'shoplens prepare' first)");
  const nlohmann::json doc = read_json_document(path);
  const DatasetFields fields(doc, file);
  // "prepare": what `shoplens prepare` recorded of its run (write_dataset_info's extra_json).
  fields.check_keys({"format", "format_version", "classes", "metadata_fields", "metadata_vocabulary", "storage_size",
                     "encoding", "mean", "std", "shards", "prepare"});
  DatasetInfo info;
  if (fields.get<int>("format_version") != 1)
    fields.fail("format_version", fmt::format("{} is not supported (expected 1)", fields.get<int>("format_version")));
  info.classes = fields.get<std::vector<std::string>>("classes");
  info.metadata_fields = fields.get<std::vector<std::string>>("metadata_fields");
  info.metadata_vocabulary = fields.get<std::vector<std::vector<std::string>>>("metadata_vocabulary");
  info.storage_size = fields.get<int>("storage_size");
  info.encoding = fields.get<std::string>("encoding");
  info.mean = fields.get<std::array<double, 3>>("mean");
  info.std = fields.get<std::array<double, 3>>("std");
  info.shards = read_listings(fields, kImageShardFormat);
  if (info.classes.empty()) throw DataError(file + ": no classes");
  return info;
}

std::shared_ptr<ShardDataset> ShardDataset::open(const fs::path& dir, Split split, bool verify_data) {
  auto ds = std::shared_ptr<ShardDataset>(new ShardDataset());
  ds->info_ = read_dataset_info(dir);
  const int num_classes = static_cast<int>(ds->info_.classes.size());
  for (const auto& shard : ds->info_.shards) {
    if (shard.split != split) continue;
    auto reader = std::make_unique<ShardReader>(dir, shard.name, num_classes, verify_data, shard.index_crc32);
    check_listed(*reader, shard, kImageShardFormat, dir);
    ds->shards_.add(std::move(reader));
  }
  return ds;
}

SampleRef ShardDataset::sample(std::size_t index) const {
  const auto [reader, i] = shards_.locate(index);
  const auto& e = reader->entry(i);
  SampleRef s;
  s.data = reader->payload(i);
  s.size = e.length;
  s.height = e.height;
  s.width = e.width;
  s.encoding = static_cast<PayloadEncoding>(e.encoding);
  s.label = e.label;
  s.sample_id = e.sample_id;
  return s;
}

void InMemoryImageSource::add(std::vector<std::uint8_t> payload, int height, int width, PayloadEncoding encoding,
                              int label) {
  samples_.push_back({std::move(payload), height, width, encoding, label});
}

SampleRef InMemoryImageSource::sample(std::size_t index) const {
  const auto& s = samples_.at(index);
  SampleRef ref;
  ref.data = s.payload.data();
  ref.size = s.payload.size();
  ref.height = s.height;
  ref.width = s.width;
  ref.encoding = s.encoding;
  ref.label = s.label;
  ref.sample_id = index;
  return ref;
}

}  // namespace shoplens
