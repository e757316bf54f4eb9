// Writing and reading packed shards, and the prepared dataset (a folder of shards described by
// dataset.json) as an ImageSource for one split.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "shoplens/core/atomic_file.h"
#include "shoplens/data/image_source.h"
#include "shoplens/data/manifest.h"
#include "shoplens/data/shard_format.h"

namespace shoplens {

using MetadataCodes = std::array<std::uint16_t, kIndexMetadataSlots>;

struct ShardInfo {
  std::string name;  // e.g. "train-00003"; files <name>.data and <name>.idx
  Split split = Split::kTrain;
  std::uint64_t count = 0;
  std::uint64_t data_bytes = 0;
  std::uint32_t data_crc32 = 0;
  std::uint32_t index_crc32 = 0;  // CRC-32 of the whole .idx file
};

class ShardWriter {
 public:
  ShardWriter(const std::filesystem::path& dir, std::string name, Split split);
  void add(const std::uint8_t* payload, std::size_t length, int height, int width, PayloadEncoding encoding, int label,
           std::uint64_t sample_id, const MetadataCodes& metadata);
  // Commits the data file, then the index (the index's presence marks the shard complete).
  ShardInfo finish();

 private:
  std::filesystem::path dir_;
  ShardInfo info_;
  AtomicFileWriter data_;
  std::vector<ShardIndexEntry> entries_;
};

// A read-only memory map.
class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

class ShardReader {
 public:
  // Validates the index; with `verify_data` also checks the data file's CRC-32.
  ShardReader(const std::filesystem::path& dir, const std::string& name, int num_classes, bool verify_data);
  std::size_t size() const { return index_.entries.size(); }
  const ShardIndexEntry& entry(std::size_t i) const { return index_.entries[i]; }
  const std::uint8_t* payload(std::size_t i) const {
    return data_ ? data_->data() + index_.entries[i].offset : nullptr;
  }
  const ShardIndexHeader& header() const { return index_.header; }

 private:
  ShardIndex index_;
  std::unique_ptr<MappedFile> data_;
};

// Contents of dataset.json.
struct DatasetInfo {
  std::vector<std::string> classes;
  std::vector<std::string> metadata_fields;
  std::vector<std::vector<std::string>> metadata_vocabulary;  // per field; code k means vocabulary[k-1]
  int storage_size = 0;
  std::string encoding;
  std::array<double, 3> mean{0, 0, 0};
  std::array<double, 3> std{1, 1, 1};
  std::vector<ShardInfo> shards;
};

DatasetInfo read_dataset_info(const std::filesystem::path& dir);
void write_dataset_info(const std::filesystem::path& dir, const DatasetInfo& info, const std::string& extra_json = "");

// The samples of one split of a prepared dataset.
class ShardDataset : public ImageSource {
 public:
  static std::shared_ptr<ShardDataset> open(const std::filesystem::path& dir, Split split, bool verify_data = false);
  std::size_t size() const override { return locations_.size(); }
  SampleRef sample(std::size_t index) const override;
  int num_classes() const override { return static_cast<int>(info_.classes.size()); }
  const DatasetInfo& info() const { return info_; }
  const ShardIndexEntry& entry(std::size_t index) const;

 private:
  DatasetInfo info_;
  std::vector<std::unique_ptr<ShardReader>> readers_;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> locations_;  // (reader, entry)
};

}  // namespace shoplens
