#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <limits>

#include <nlohmann/json.hpp>

#include "shoplens/core/errors.h"
#include "shoplens/core/checksum.h"
#include "shoplens/train/tensorboard.h"
#include "tensorboard_reader.h"
#include "test_util.h"

namespace shoplens {
namespace {

using testing::read_tensorboard_events;
using testing::read_tensorboard_scalars;

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

using testing::ScratchDir;

std::uint32_t float_bits(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

std::vector<std::filesystem::path> event_files(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

// A file with a few scalars, the values chosen to exercise the encoding: negative and large
// steps, a NaN, an infinity, a tag with a slash and a non-ASCII character.
struct Sample {
  std::string tag;
  float value;
  std::int64_t step;
  double wall_time;
};

const std::vector<Sample>& samples() {
  static const std::vector<Sample> kSamples{
      {"train/loss", 2.5f, 0, 1700000000.25},
      {"train/loss", 0.1f, 1, 1700000001.5},
      {"val/macro_f1", -3.75e-7f, 1LL << 40, 1700000002.0},
      {"val/accuracy", std::numeric_limits<float>::quiet_NaN(), -5, 1700000003.0},
      {"train/lr", std::numeric_limits<float>::infinity(), std::numeric_limits<std::int64_t>::max(), 1.0},
      {"caf\xc3\xa9/x", 1.0f, 300, 1700000004.0},
  };
  return kSamples;
}

std::filesystem::path write_samples(const std::filesystem::path& dir) {
  TensorBoardWriter writer(dir);
  for (const auto& s : samples()) writer.add_scalar(s.tag, s.value, s.step, s.wall_time);
  writer.flush();
  return writer.file();
}

TEST(TensorBoardCrc32c, KnownVectors) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c("", 0), 0u);
  // RFC 3720 (iSCSI) appendix B.4.
  std::array<unsigned char, 32> bytes{};
  EXPECT_EQ(crc32c(bytes.data(), bytes.size()), 0x8A9136AAu);
  bytes.fill(0xFF);
  EXPECT_EQ(crc32c(bytes.data(), bytes.size()), 0x62A8AB43u);
  for (int i = 0; i < 32; ++i) bytes[i] = static_cast<unsigned char>(i);
  EXPECT_EQ(crc32c(bytes.data(), bytes.size()), 0x46DD794Eu);
  for (int i = 0; i < 32; ++i) bytes[i] = static_cast<unsigned char>(31 - i);
  EXPECT_EQ(crc32c(bytes.data(), bytes.size()), 0x113FDB5Cu);
}

TEST(TensorBoardCrc32c, ExtendEqualsWholeAndMask) {
  const std::string text = "The quick brown fox jumps over the lazy dog";
  for (std::size_t cut = 0; cut <= text.size(); ++cut)
    EXPECT_EQ(crc32c_extend(crc32c(text.data(), cut), text.data() + cut, text.size() - cut),
              crc32c(text.data(), text.size()));
  EXPECT_EQ(mask_crc32c(0), 0xa282ead8u);
  EXPECT_EQ(mask_crc32c(0xE3069283u), ((0xE3069283u >> 15) | (0xE3069283u << 17)) + 0xa282ead8u);
}

TEST(TensorBoard, FileNameFollowsTheTensorBoardPattern) {
  ScratchDir dir("tb");
  TensorBoardWriter writer(dir.path() / "logs");
  const std::string name = writer.file().filename().string();
  EXPECT_EQ(name.rfind("events.out.tfevents.", 0), 0u) << name;
  EXPECT_NE(name.find("." + std::to_string(::getpid()) + ".shoplens"), std::string::npos) << name;
  EXPECT_EQ(writer.file().parent_path(), dir.path() / "logs");
  // A second writer in the same second gets a name of its own that sorts after the first.
  TensorBoardWriter second(dir.path() / "logs");
  EXPECT_NE(second.file(), writer.file());
  EXPECT_EQ(event_files(dir.path() / "logs").size(), 2u);
}

TEST(TensorBoard, WriteThenReadBack) {
  ScratchDir dir("tb");
  auto file = write_samples(dir.path());
  auto events = read_tensorboard_events(file);
  ASSERT_EQ(events.size(), samples().size() + 1);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_TRUE(events[0].scalars.empty());
  EXPECT_GT(events[0].wall_time, 1.6e9);

  auto scalars = read_tensorboard_scalars(file);
  ASSERT_EQ(scalars.size(), samples().size());
  for (std::size_t i = 0; i < scalars.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(scalars[i].tag, samples()[i].tag);
    EXPECT_EQ(float_bits(scalars[i].value), float_bits(samples()[i].value));
    EXPECT_EQ(scalars[i].step, samples()[i].step);
    EXPECT_EQ(scalars[i].wall_time, samples()[i].wall_time);
  }
}

TEST(TensorBoard, BufferedUntilFlushAndFlushedOnDestruction) {
  ScratchDir dir("tb");
  std::filesystem::path file;
  {
    TensorBoardWriter writer(dir.path());
    file = writer.file();
    writer.add_scalar("a", 1.0f, 1);
    EXPECT_EQ(read_tensorboard_scalars(file).size(), 0u);  // only the file_version record so far
    EXPECT_EQ(read_tensorboard_events(file).size(), 1u);
    writer.flush();
    EXPECT_EQ(read_tensorboard_scalars(file).size(), 1u);
    writer.add_scalar("a", 2.0f, 2);
  }
  auto scalars = read_tensorboard_scalars(file);
  ASSERT_EQ(scalars.size(), 2u);
  EXPECT_EQ(scalars[1].value, 2.0f);
  EXPECT_NEAR(scalars[1].wall_time, static_cast<double>(std::time(nullptr)), 60.0);  // default: now
}

TEST(TensorBoard, SessionStartIsRecorded) {
  ScratchDir dir("tb");
  TensorBoardWriter writer(dir.path());
  writer.add_scalar("a", 1.0f, 4);
  writer.add_session_start(5);
  writer.flush();
  auto events = read_tensorboard_events(writer.file());
  ASSERT_EQ(events.size(), 3u);
  EXPECT_FALSE(events[1].session_start);
  EXPECT_TRUE(events[2].session_start);
  EXPECT_EQ(events[2].step, 5);
  EXPECT_TRUE(events[2].scalars.empty());
}

TEST(TensorBoard, EveryCorruptedByteIsDetected) {
  ScratchDir dir("tb");
  auto file = write_samples(dir.path());
  const std::string good = testing::read_text(file);
  ASSERT_GT(good.size(), 100u);
  for (std::size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x5A);
    testing::write_text(file, bad);
    EXPECT_THROW(read_tensorboard_events(file), DataError) << "byte " << i;
  }
  testing::write_text(file, good);
  EXPECT_EQ(read_tensorboard_scalars(file).size(), samples().size());
}

TEST(TensorBoard, CorruptionAndTruncationMessagesNameFileAndOffset) {
  ScratchDir dir("tb");
  auto file = write_samples(dir.path());
  const std::string good = testing::read_text(file);
  std::string bad = good;
  bad[good.size() - 6] = static_cast<char>(bad[good.size() - 6] ^ 1);  // inside the last payload
  testing::write_text(file, bad);
  EXPECT_THAT(
      [&] { read_tensorboard_events(file); },
      ThrowsMessage<DataError>(AllOf(HasSubstr("CRC mismatch in the record payload"), HasSubstr(file.string()))));
  for (std::size_t cut : {std::size_t{1}, std::size_t{4}, std::size_t{20}}) {
    testing::write_text(file, good.substr(0, good.size() - cut));
    EXPECT_THAT([&] { read_tensorboard_events(file); }, ThrowsMessage<DataError>(HasSubstr("truncated")))
        << "a file cut by " << cut;
  }
}

TEST(TensorBoard, UnwritableFolderIsIoErrorNamingIt) {
  ScratchDir dir("tb");
  testing::write_text(dir / "plain_file", "x");
  EXPECT_THAT([&] { TensorBoardWriter writer(dir / "plain_file" / "logs"); },
              ThrowsMessage<IoError>(HasSubstr("plain_file")));
  EXPECT_THROW(read_tensorboard_events(dir / "missing"), IoError);
}

// An independent reader (pure Python, its own CRC-32C and protobuf decoding) must agree.
TEST(TensorBoard, IndependentPythonReaderAgrees) {
  if (::access(testing::python().c_str(), X_OK) != 0) GTEST_SKIP() << testing::python() << " not found";
  const std::string script = testing::source_dir() + "/scripts/fixtures/read_tfevents.py";
  ScratchDir dir("tb");
  std::filesystem::path file;
  {
    TensorBoardWriter writer(dir.path());
    file = writer.file();
    for (const auto& s : samples()) writer.add_scalar(s.tag, s.value, s.step, s.wall_time);
    writer.add_session_start(301);
  }
  auto result = testing::run_shell(testing::python() + " " + script + " '" + file.string() + "' 2>&1");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  auto doc = nlohmann::json::parse(result.output);
  EXPECT_EQ(doc["records"], samples().size() + 2);
  EXPECT_EQ(doc["file_version"], "brain.Event:2");
  EXPECT_EQ(doc["session_starts"], nlohmann::json::array({301}));
  ASSERT_EQ(doc["scalars"].size(), samples().size());
  for (std::size_t i = 0; i < samples().size(); ++i) {
    SCOPED_TRACE(i);
    const auto& s = doc["scalars"][i];
    char bits[16];
    std::snprintf(bits, sizeof bits, "0x%08x", float_bits(samples()[i].value));
    EXPECT_EQ(s["tag"], samples()[i].tag);
    EXPECT_EQ(s["bits"], bits);
    EXPECT_EQ(s["step"].get<std::int64_t>(), samples()[i].step);
    EXPECT_EQ(s["wall_time"].get<double>(), samples()[i].wall_time);
  }

  // The Python reader checks CRCs too (so its agreement means something).
  std::string bad = testing::read_text(file);
  bad[bad.size() / 2] = static_cast<char>(bad[bad.size() / 2] ^ 0x10);
  testing::write_text(file, bad);
  result = testing::run_shell(testing::python() + " " + script + " '" + file.string() + "' 2>&1");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("CRC mismatch"), std::string::npos) << result.output;
}

}  // namespace
}  // namespace shoplens
