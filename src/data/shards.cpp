#include "shoplens/data/shards.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

#include "shoplens/core/errors.h"
#include "shoplens/core/utf8.h"

namespace shoplens {

namespace fs = std::filesystem;

ShardWriter::ShardWriter(const fs::path& dir, std::string name, Split split)
    : dir_(dir), data_(dir / (name + ".data")) {
  info_.name = std::move(name);
  info_.split = split;
}

void ShardWriter::add(const std::uint8_t* payload, std::size_t length, int height, int width, PayloadEncoding encoding,
                      int label, std::uint64_t sample_id, const MetadataCodes& metadata) {
  if (length == 0 || length > UINT32_MAX) throw Error("shard payload of " + std::to_string(length) + " bytes");
  if (height <= 0 || width <= 0 || height > UINT16_MAX || width > UINT16_MAX)
    throw Error("shard image size out of range: " + std::to_string(width) + "x" + std::to_string(height));
  ShardIndexEntry e{};
  e.sample_id = sample_id;
  e.offset = data_.bytes_written();
  e.length = static_cast<std::uint32_t>(length);
  e.height = static_cast<std::uint16_t>(height);
  e.width = static_cast<std::uint16_t>(width);
  e.channels = 3;
  e.encoding = static_cast<std::uint8_t>(encoding);
  e.split = static_cast<std::uint8_t>(info_.split);
  e.label = label;
  std::copy(metadata.begin(), metadata.end(), e.metadata);
  data_.write(payload, length);
  info_.data_crc32 = crc32_of(payload, length, info_.data_crc32);
  entries_.push_back(e);
}

ShardInfo ShardWriter::finish() {
  data_.commit();
  ShardIndexHeader h{};
  std::memcpy(h.magic, kShardIndexMagic, sizeof h.magic);
  h.version = kShardIndexVersion;
  h.entry_size = sizeof(ShardIndexEntry);
  h.count = entries_.size();
  h.data_size = data_.bytes_written();
  h.data_crc32 = info_.data_crc32;
  h.entries_crc32 = crc32_of(entries_.data(), entries_.size() * sizeof(ShardIndexEntry));
  std::string bytes(reinterpret_cast<const char*>(&h), sizeof h);
  bytes.append(reinterpret_cast<const char*>(entries_.data()), entries_.size() * sizeof(ShardIndexEntry));
  write_file_atomic(dir_ / (info_.name + ".idx"), bytes);
  info_.count = entries_.size();
  info_.data_bytes = h.data_size;
  info_.index_crc32 = crc32_of(bytes.data(), bytes.size());
  return info_;
}

MappedFile::MappedFile(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IoError("cannot open '" + path.string() + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw IoError("cannot stat '" + path.string() + "': " + std::strerror(errno));
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      throw IoError("cannot map '" + path.string() + "': " + std::strerror(errno));
    }
    // Samples are read in shuffled order; do not let the kernel read far ahead.
    ::madvise(p, size_, MADV_RANDOM);
    data_ = static_cast<const std::uint8_t*>(p);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<std::uint8_t*>(data_), size_);
}

ShardReader::ShardReader(const fs::path& dir, const std::string& name, int num_classes, bool verify_data) {
  const fs::path idx = dir / (name + ".idx"), data = dir / (name + ".data");
  MappedFile index_file(idx);
  index_ = parse_shard_index(index_file.data(), index_file.size(), idx.string(), num_classes);
  if (index_.header.data_size == 0) return;
  data_ = std::make_unique<MappedFile>(data);
  if (data_->size() != index_.header.data_size)
    throw DataError(data.string() + ": size " + std::to_string(data_->size()) + " does not match its index (" +
                    std::to_string(index_.header.data_size) + " bytes)");
  if (verify_data && crc32_of(data_->data(), data_->size()) != index_.header.data_crc32)
    throw DataError(data.string() + ": checksum mismatch (corrupted shard data)");
}

namespace {

nlohmann::json shard_to_json(const ShardInfo& s) {
  return {{"name", s.name},
          {"split", split_name(s.split)},
          {"count", s.count},
          {"data_bytes", s.data_bytes},
          {"data_crc32", s.data_crc32},
          {"index_crc32", s.index_crc32}};
}

template <class T>
T required(const nlohmann::json& doc, const char* key, const std::string& file) {
  if (!doc.contains(key)) throw DataError(file + ": missing key '" + key + "'");
  try {
    return doc.at(key).get<T>();
  } catch (const nlohmann::json::exception& e) {
    throw DataError(file + ": key '" + key + "': " + e.what());
  }
}

}  // namespace

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
  doc["shards"] = nlohmann::json::array();
  for (const auto& s : info.shards) doc["shards"].push_back(shard_to_json(s));
  if (!extra_json.empty()) doc["prepare"] = nlohmann::json::parse(extra_json);
  write_file_atomic(dir / "dataset.json", dump_json_escaped(doc, 2) + "\n");
}

DatasetInfo read_dataset_info(const fs::path& dir) {
  const fs::path file = dir / "dataset.json";
  if (!fs::exists(file))
    throw DataError("'" + dir.string() + "' is not a prepared dataset (no dataset.json; run 'shoplens prepare' first)");
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(read_file(file));
  } catch (const nlohmann::json::parse_error& e) {
    throw DataError(file.string() + ": " + e.what());
  }
  DatasetInfo info;
  if (required<int>(doc, "format_version", file.string()) != 1)
    throw DataError(file.string() + ": unsupported format_version");
  info.classes = required<std::vector<std::string>>(doc, "classes", file.string());
  info.metadata_fields = required<std::vector<std::string>>(doc, "metadata_fields", file.string());
  info.metadata_vocabulary = required<std::vector<std::vector<std::string>>>(doc, "metadata_vocabulary", file.string());
  info.storage_size = required<int>(doc, "storage_size", file.string());
  info.encoding = required<std::string>(doc, "encoding", file.string());
  info.mean = required<std::array<double, 3>>(doc, "mean", file.string());
  info.std = required<std::array<double, 3>>(doc, "std", file.string());
  for (const auto& s : required<nlohmann::json>(doc, "shards", file.string())) {
    ShardInfo shard;
    shard.name = required<std::string>(s, "name", file.string());
    auto split = parse_split(required<std::string>(s, "split", file.string()));
    if (!split) throw DataError(file.string() + ": shard '" + shard.name + "' has an unknown split");
    shard.split = *split;
    shard.count = required<std::uint64_t>(s, "count", file.string());
    shard.data_bytes = required<std::uint64_t>(s, "data_bytes", file.string());
    shard.data_crc32 = required<std::uint32_t>(s, "data_crc32", file.string());
    shard.index_crc32 = required<std::uint32_t>(s, "index_crc32", file.string());
    if (shard.name.find('/') != std::string::npos || shard.name.find("..") != std::string::npos)
      throw DataError(file.string() + ": shard name '" + shard.name + "' is not a plain file name");
    info.shards.push_back(shard);
  }
  if (info.classes.empty()) throw DataError(file.string() + ": no classes");
  return info;
}

std::shared_ptr<ShardDataset> ShardDataset::open(const fs::path& dir, Split split, bool verify_data) {
  auto ds = std::shared_ptr<ShardDataset>(new ShardDataset());
  ds->info_ = read_dataset_info(dir);
  for (const auto& shard : ds->info_.shards) {
    if (shard.split != split) continue;
    auto reader =
        std::make_unique<ShardReader>(dir, shard.name, static_cast<int>(ds->info_.classes.size()), verify_data);
    if (reader->size() != shard.count)
      throw DataError((dir / (shard.name + ".idx")).string() + ": holds " + std::to_string(reader->size()) +
                      " records but dataset.json says " + std::to_string(shard.count));
    const auto r = static_cast<std::uint32_t>(ds->readers_.size());
    for (std::size_t i = 0; i < reader->size(); ++i) ds->locations_.emplace_back(r, static_cast<std::uint32_t>(i));
    ds->readers_.push_back(std::move(reader));
  }
  return ds;
}

const ShardIndexEntry& ShardDataset::entry(std::size_t index) const {
  const auto& [r, i] = locations_.at(index);
  return readers_[r]->entry(i);
}

SampleRef ShardDataset::sample(std::size_t index) const {
  const auto& [r, i] = locations_.at(index);
  const auto& e = readers_[r]->entry(i);
  SampleRef s;
  s.data = readers_[r]->payload(i);
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
