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

class ShardWriter {
 public:
  ShardWriter(const std::filesystem::path& dir, std::string name, Split split);
  void add(const std::uint8_t* payload, std::size_t length, int height, int width, PayloadEncoding encoding, int label,
           std::uint64_t sample_id, const MetadataCodes& metadata);
  // Commits the data file, then the index (the index's presence marks the shard complete).
  ShardListing finish();

 private:
  ShardFileWriter files_;
  std::vector<ShardIndexEntry> entries_;
};

class ShardReader {
 public:
  // Validates the index (against `listed_index_crc32` too, when not 0); with `verify_data` also
  // checks the data file's CRC-32.
  ShardReader(const std::filesystem::path& dir, const std::string& name, int num_classes, bool verify_data,
              std::uint32_t listed_index_crc32 = 0);
  ~ShardReader();
  std::size_t size() const { return index_.entries.size(); }
  const ShardIndexEntry& entry(std::size_t i) const { return index_.entries[i]; }
  const std::uint8_t* payload(std::size_t i) const;
  const ShardIndexHeader& prefix() const { return index_.header; }

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
  std::vector<ShardListing> shards;
};

DatasetInfo read_dataset_info(const std::filesystem::path& dir);
void write_dataset_info(const std::filesystem::path& dir, const DatasetInfo& info, const std::string& extra_json = "");

// The samples of one split of a prepared dataset.
class ShardDataset : public ImageSource {
 public:
  static std::shared_ptr<ShardDataset> open(const std::filesystem::path& dir, Split split, bool verify_data = false);
  std::size_t size() const override { return shards_.size(); }
  SampleRef sample(std::size_t index) const override;
  int num_classes() const override { return static_cast<int>(info_.classes.size()); }
  const DatasetInfo& info() const { return info_; }
  const ShardIndexEntry& entry(std::size_t index) const { return shards_.entry(index); }

 private:
  DatasetInfo info_;
  ShardTable<ShardReader> shards_;
};

}  // namespace shoplens
