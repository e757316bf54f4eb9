#include <gtest/gtest.h>

#include <cstring>

#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/data/shards.h"
#include "test_util.h"

namespace shoplens {
namespace {

std::vector<std::uint8_t> raw_pixels(int h, int w, std::uint8_t seed) {
  std::vector<std::uint8_t> px(static_cast<std::size_t>(h) * w * 3);
  for (std::size_t i = 0; i < px.size(); ++i) px[i] = static_cast<std::uint8_t>(seed + i * 7);
  return px;
}

ShardListing write_shard(const std::filesystem::path& dir, const std::string& name, int n) {
  ShardWriter w(dir, name, Split::kTrain);
  for (int i = 0; i < n; ++i) {
    auto px = raw_pixels(4 + i, 5, static_cast<std::uint8_t>(i));
    MetadataCodes meta{};
    meta[0] = static_cast<std::uint16_t>(i % 3);
    w.add(px.data(), px.size(), 4 + i, 5, PayloadEncoding::kRaw, i % 2, 100 + i, meta);
  }
  return w.finish();
}

TEST(Shards, RoundTripPayloadsAndEntries) {
  testing::ScratchDir dir("shards");
  ShardListing info = write_shard(dir.path(), "train-00000", 5);
  EXPECT_EQ(info.count, 5u);
  ShardReader reader(dir.path(), "train-00000", 2, /*verify_data=*/true);
  ASSERT_EQ(reader.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    const auto& e = reader.entry(i);
    EXPECT_EQ(e.sample_id, 100u + i);
    EXPECT_EQ(e.height, 4 + i);
    EXPECT_EQ(e.label, i % 2);
    EXPECT_EQ(e.metadata[0], i % 3);
    auto expected = raw_pixels(4 + i, 5, static_cast<std::uint8_t>(i));
    ASSERT_EQ(e.length, expected.size());
    EXPECT_EQ(std::memcmp(reader.payload(i), expected.data(), expected.size()), 0);
  }
}

TEST(Shards, EmptyShardIsValid) {
  testing::ScratchDir dir("shards");
  write_shard(dir.path(), "val-00000", 0);
  ShardReader reader(dir.path(), "val-00000", 2, true);
  EXPECT_EQ(reader.size(), 0u);
}

TEST(Shards, CorruptedDataFailsChecksum) {
  testing::ScratchDir dir("shards");
  write_shard(dir.path(), "s", 3);
  std::string data = read_file(dir / "s.data");
  data[10] ^= 0x5A;
  write_file_atomic(dir / "s.data", data);
  EXPECT_NO_THROW(ShardReader(dir.path(), "s", 2, false));  // the index is still fine
  try {
    ShardReader(dir.path(), "s", 2, true);
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("s.data: checksum mismatch"), std::string::npos) << e.what();
  }
}

TEST(Shards, TruncatedDataFileIsDetected) {
  testing::ScratchDir dir("shards");
  write_shard(dir.path(), "s", 3);
  std::string data = read_file(dir / "s.data");
  write_file_atomic(dir / "s.data", data.substr(0, data.size() - 1));
  EXPECT_THROW(ShardReader(dir.path(), "s", 2, false), DataError);
}

TEST(Shards, IndexValidationNamesTheProblem) {
  testing::ScratchDir dir("shards");
  write_shard(dir.path(), "s", 3);
  const std::string good = read_file(dir / "s.idx");
  auto error_for = [&](std::string bytes) {
    try {
      parse_shard_index(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), "s.idx", 2);
    } catch (const DataError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error_for(good), "");
  EXPECT_NE(error_for(good.substr(0, 10)).find("shorter than the 40-byte header"), std::string::npos);
  std::string bad_magic = good;
  bad_magic[0] = 'X';
  EXPECT_NE(error_for(bad_magic).find("bad magic"), std::string::npos);
  EXPECT_NE(error_for(good.substr(0, good.size() - 1)).find("entries"), std::string::npos);
  std::string flipped = good;
  flipped[sizeof(ShardIndexHeader) + 3] ^= 1;
  EXPECT_NE(error_for(flipped).find("checksum"), std::string::npos);
  // A label beyond the class count is caught even with a consistent checksum.
  EXPECT_NE(
      [&] {
        try {
          parse_shard_index(reinterpret_cast<const std::uint8_t*>(good.data()), good.size(), "s.idx", 1);
        } catch (const DataError& e) {
          return std::string(e.what());
        }
        return std::string();
      }()
          .find("label 1 out of range"),
      std::string::npos);
}

TEST(Shards, DatasetInfoRoundTripAndSplitView) {
  testing::ScratchDir dir("shards");
  DatasetInfo info;
  info.classes = {"a", "b"};
  info.metadata_fields = {"m"};
  info.metadata_vocabulary = {{"x", "y"}};
  info.storage_size = 8;
  info.encoding = "raw";
  info.mean = {0.1, 0.2, 0.3};
  info.shards.push_back(write_shard(dir.path(), "train-00000", 4));
  info.shards.push_back(write_shard(dir.path(), "train-00001", 2));
  write_dataset_info(dir.path(), info);
  auto ds = ShardDataset::open(dir.path(), Split::kTrain, true);
  EXPECT_EQ(ds->size(), 6u);
  EXPECT_EQ(ds->num_classes(), 2);
  EXPECT_EQ(ds->sample(5).sample_id, 101u);
  EXPECT_EQ(ds->info().mean[2], 0.3);
  EXPECT_EQ(ShardDataset::open(dir.path(), Split::kVal)->size(), 0u);
  EXPECT_THROW(ShardDataset::open(dir / "missing", Split::kTrain), DataError);
}

// dataset.json records each index's CRC-32 and each shard's count and payload: a shard replaced by
// another valid one (a copy from another preparation, a half-finished rebuild) is not read.
TEST(Shards, OpeningChecksEachShardAgainstTheDatasetFile) {
  testing::ScratchDir dir("shards");
  DatasetInfo info;
  info.classes = {"a", "b"};
  info.shards.push_back(write_shard(dir.path(), "train-00000", 4));
  write_dataset_info(dir.path(), info);
  write_shard(dir.path(), "train-00000", 3);  // valid on its own, not what dataset.json lists
  auto expect_refused = [&](const std::string& needle) {
    try {
      ShardDataset::open(dir.path(), Split::kTrain);
      ADD_FAILURE() << "opened a shard that dataset.json does not describe";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_refused("train-00000.idx: checksum does not match dataset.json");
  info.shards[0].index_crc32 = 0;  // no index checksum listed: the count still differs
  write_dataset_info(dir.path(), info);
  expect_refused("train-00000.idx: holds 3 records but dataset.json says 4");
}

TEST(AtomicFile, UncommittedWriterLeavesNothing) {
  testing::ScratchDir dir("atomic");
  {
    AtomicFileWriter w(dir / "out.bin");
    w.write("abc", 3);
  }  // destroyed without commit, as when a writer is interrupted
  EXPECT_FALSE(std::filesystem::exists(dir / "out.bin"));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
  write_file_atomic(dir / "out.bin", "done");
  EXPECT_EQ(read_file(dir / "out.bin"), "done");
}

}  // namespace
}  // namespace shoplens
