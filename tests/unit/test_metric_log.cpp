#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <limits>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "shoplens/core/errors.h"
#include "shoplens/core/strings.h"
#include "shoplens/train/metric_log.h"
#include "shoplens/train/tensorboard.h"
#include "tensorboard_reader.h"
#include "test_util.h"

namespace shoplens {
namespace {

using testing::read_tensorboard_events;
using testing::read_tensorboard_scalars;

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

using testing::read_text;
using testing::ScratchDir;

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// The default logger's lines while it lives.
class CapturedLog {
 public:
  CapturedLog() : previous_(spdlog::default_logger()) {
    auto logger = std::make_shared<spdlog::logger>("captured", std::make_shared<spdlog::sinks::ostream_sink_mt>(out_));
    logger->set_level(spdlog::level::trace);
    spdlog::set_default_logger(logger);
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  std::string text() const { return out_.str(); }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> previous_;
};

std::vector<std::string> lines_of(const std::filesystem::path& file) {
  auto lines = split(read_text(file), '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

void append_raw(const std::filesystem::path& file, const std::string& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::app);
  out << bytes;
}

// Steps of the JSONL records, in file order; every line must parse.
std::vector<std::int64_t> jsonl_steps(const std::filesystem::path& file) {
  std::vector<std::int64_t> steps;
  for (const auto& line : lines_of(file)) steps.push_back(nlohmann::json::parse(line).at("step").get<std::int64_t>());
  return steps;
}

void record_steps(MetricLog& log, std::int64_t first, std::int64_t last) {
  for (std::int64_t s = first; s <= last; ++s) {
    log.record(s, s / 4.0, "train", {{"loss", 1.0 / s}});
    if (s % 2 == 0) log.record(s, s / 4.0, "val", {{"loss", 2.0 / s}, {"accuracy", 0.5}});
  }
}

TEST(MetricLog, RecordWritesJsonlAndLongCsv) {
  ScratchDir dir("ml");
  {
    MetricLog log(dir.path(), false);
    log.record(10, 0.5, "train", {{"loss", 0.25}, {"lr", 1e-5}});
    log.record(12, 1.0, "val", {{"loss", kNan}, {"accuracy", kInf}, {"macro_f1", -kInf}});
    // Visible at once, before the log goes away.
    EXPECT_EQ(lines_of(dir / "metrics.jsonl").size(), 2u);
  }
  EXPECT_EQ(lines_of(dir / "metrics.jsonl"),
            (std::vector<std::string>{
                R"({"step":10,"epoch":0.5,"phase":"train","loss":0.25,"lr":1e-05})",
                R"({"step":12,"epoch":1.0,"phase":"val","loss":null,"accuracy":null,"macro_f1":null})"}));
  EXPECT_EQ(lines_of(dir / "metrics.csv"),
            (std::vector<std::string>{"step,epoch,phase,name,value", "10,0.5,train,loss,0.25", "10,0.5,train,lr,1e-05",
                                      "12,1,val,loss,nan", "12,1,val,accuracy,inf", "12,1,val,macro_f1,-inf"}));
}

TEST(MetricLog, ValuesRoundTripExactly) {
  ScratchDir dir("ml");
  const double value = 0.1 + 0.2;  // not 0.3: needs all 17 digits
  {
    MetricLog log(dir.path(), false);
    log.record(1, 1.0 / 3.0, "test", {{"loss", value}});
  }
  auto doc = nlohmann::json::parse(lines_of(dir / "metrics.jsonl")[0]);
  EXPECT_EQ(doc["loss"].get<double>(), value);
  EXPECT_EQ(doc["epoch"].get<double>(), 1.0 / 3.0);
  auto row = split(lines_of(dir / "metrics.csv")[1], ',');
  EXPECT_EQ(std::stod(row[4]), value);
  EXPECT_EQ(std::stod(row[1]), 1.0 / 3.0);
}

TEST(MetricLog, InvalidRecordsAreRejectedBeforeWriting) {
  ScratchDir dir("ml");
  MetricLog log(dir.path(), false);
  EXPECT_THAT(
      [&] {
        log.record(1, 0, "valid", {{"loss", 1}});
      },
      ThrowsMessage<DataError>(HasSubstr("did you mean 'val'")));
  EXPECT_THROW(log.record(1, 0, "train", {{"step", 1}}), DataError);
  EXPECT_THROW(log.record(1, 0, "train", {{"loss", 1}, {"loss", 2}}), DataError);
  EXPECT_THROW(log.record(1, 0, "train", {{"", 1}}), DataError);
  EXPECT_THROW(log.record(1, 0, "train", {{"a\nb", 1}}), DataError);
  EXPECT_TRUE(lines_of(dir / "metrics.jsonl").empty());
  EXPECT_EQ(lines_of(dir / "metrics.csv").size(), 1u);  // the header only
}

TEST(MetricLog, NamesNeedingCsvQuotesStayOneRow) {
  ScratchDir dir("ml");
  {
    MetricLog log(dir.path(), false);
    log.record(3, 0, "val", {{"f1,\"blurry\"", 0.5}});
  }
  EXPECT_EQ(lines_of(dir / "metrics.csv")[1], R"(3,0,val,"f1,""blurry""",0.5)");
  EXPECT_EQ(nlohmann::json::parse(lines_of(dir / "metrics.jsonl")[0])["f1,\"blurry\""], 0.5);
}

TEST(MetricLog, TruncateAfterKeepsStepsUpToTheCheckpointOnce) {
  ScratchDir dir("ml");
  {
    MetricLog log(dir.path(), false);
    record_steps(log, 1, 10);
  }
  // The resumed process: checkpoint at step 6, training goes on from step 7.
  {
    MetricLog log(dir.path(), false);
    log.truncate_after(6);
    EXPECT_EQ(jsonl_steps(dir / "metrics.jsonl"), (std::vector<std::int64_t>{1, 2, 2, 3, 4, 4, 5, 6, 6}));
    record_steps(log, 7, 8);
  }
  EXPECT_EQ(jsonl_steps(dir / "metrics.jsonl"), (std::vector<std::int64_t>{1, 2, 2, 3, 4, 4, 5, 6, 6, 7, 8, 8}));
  auto csv = lines_of(dir / "metrics.csv");
  ASSERT_EQ(csv.size(), 1u + 8 + 4 * 2);  // header, 8 train losses, 4 val records of two values
  EXPECT_EQ(csv[0], "step,epoch,phase,name,value");
  std::vector<std::string> expected_steps{"1", "2", "2", "2", "3", "4", "4", "4",
                                          "5", "6", "6", "6", "7", "8", "8", "8"};
  for (std::size_t i = 1; i < csv.size(); ++i) EXPECT_EQ(split(csv[i], ',')[0], expected_steps[i - 1]) << csv[i];
  // No temporary left behind by the atomic rewrite.
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos) << entry.path();
}

TEST(MetricLog, TruncateAfterMinusOneEmptiesTheLogForAFreshRun) {
  ScratchDir dir("ml");
  MetricLog log(dir.path(), false);
  record_steps(log, 1, 3);
  log.truncate_after(-1);
  EXPECT_TRUE(lines_of(dir / "metrics.jsonl").empty());
  EXPECT_EQ(lines_of(dir / "metrics.csv"), (std::vector<std::string>{"step,epoch,phase,name,value"}));
  log.record(1, 0, "train", {{"loss", 1}});
  EXPECT_EQ(jsonl_steps(dir / "metrics.jsonl"), (std::vector<std::int64_t>{1}));
}

// A fresh run once logged "metric log truncated after step -1: kept 0 records, dropped 0".
TEST(MetricLog, AFreshRunSaysNothingOverAnEmptyLogAndNamesWhatItDropsOtherwise) {
  ScratchDir dir("ml");
  MetricLog log(dir.path(), false);
  {
    CapturedLog captured;
    log.truncate_after(-1);
    EXPECT_EQ(captured.text().find("metric log"), std::string::npos) << captured.text();
  }
  record_steps(log, 1, 3);
  CapturedLog captured;
  log.truncate_after(-1);
  EXPECT_EQ(captured.text().find("step -1"), std::string::npos) << captured.text();
  EXPECT_NE(captured.text().find("4 records of an earlier run"), std::string::npos) << captured.text();
}

TEST(MetricLog, TornLastLineIsIgnoredByTruncateAfter) {
  ScratchDir dir("ml");
  MetricLog log(dir.path(), false);
  record_steps(log, 1, 4);
  // What a crash in the middle of a write leaves (here: written behind the log's back).
  append_raw(dir / "metrics.jsonl", R"({"step":5,"epoch":1.25,"pha)");
  append_raw(dir / "metrics.csv", "5,1.25,tra");
  log.truncate_after(3);
  EXPECT_EQ(jsonl_steps(dir / "metrics.jsonl"), (std::vector<std::int64_t>{1, 2, 2, 3}));
  EXPECT_EQ(lines_of(dir / "metrics.csv").back(), "3,0.75,train,loss,0.3333333333333333");
  log.record(4, 1, "train", {{"loss", 0.25}});
  EXPECT_EQ(jsonl_steps(dir / "metrics.jsonl"), (std::vector<std::int64_t>{1, 2, 2, 3, 4}));
}

TEST(MetricLog, TornLastLineIsCutWhenReopened) {
  ScratchDir dir("ml");
  {
    MetricLog log(dir.path(), false);
    record_steps(log, 1, 2);
  }
  append_raw(dir / "metrics.jsonl", R"({"step":3,"ep)");
  append_raw(dir / "metrics.csv", "3,0.7");
  {
    MetricLog log(dir.path(), false);  // without truncate_after, appending must still start a new line
    log.record(3, 0.75, "train", {{"loss", 0.5}});
  }
  EXPECT_EQ(jsonl_steps(dir / "metrics.jsonl"), (std::vector<std::int64_t>{1, 2, 2, 3}));
  EXPECT_EQ(lines_of(dir / "metrics.csv").back(), "3,0.75,train,loss,0.5");
  EXPECT_EQ(lines_of(dir / "metrics.csv").size(), 1u + 1 + 3 + 1);
}

TEST(MetricLog, UnreadableMiddleLinesAreDroppedNotFatal) {
  ScratchDir dir("ml");
  MetricLog log(dir.path(), false);
  log.record(1, 0, "train", {{"loss", 1}});
  append_raw(dir / "metrics.jsonl", "not json\n{\"no_step\":1}\n");
  append_raw(dir / "metrics.csv", "x,y\n");
  log.record(2, 0, "train", {{"loss", 1}});
  log.truncate_after(5);
  EXPECT_EQ(jsonl_steps(dir / "metrics.jsonl"), (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(lines_of(dir / "metrics.csv").size(), 3u);
}

TEST(MetricLog, ForeignCsvIsRefused) {
  ScratchDir dir("ml");
  testing::write_text(dir / "metrics.csv", "epoch,loss\n1,0.5\n");
  EXPECT_THROW(MetricLog(dir.path(), false), DataError);
}

TEST(MetricLog, TensorBoardScalarsAndSessionStartOnResume) {
  ScratchDir dir("ml");
  std::filesystem::path first_file;
  {
    MetricLog log(dir.path(), true);
    ASSERT_NE(log.tensorboard(), nullptr);
    first_file = log.tensorboard()->file();
    EXPECT_EQ(first_file.parent_path(), dir.path());
    record_steps(log, 1, 4);
    // Flushed per record: readable while the log is open.
    EXPECT_EQ(read_tensorboard_scalars(first_file).size(), 4u + 2 * 2);
  }
  auto scalars = read_tensorboard_scalars(first_file);
  EXPECT_EQ(scalars[0].tag, "train/loss");
  EXPECT_EQ(scalars[0].step, 1);
  EXPECT_EQ(scalars[0].value, 1.0f);
  EXPECT_EQ(scalars[2].tag, "val/loss");
  EXPECT_EQ(scalars[3].tag, "val/accuracy");
  EXPECT_EQ(scalars[3].value, 0.5f);

  {
    // float32 in TensorBoard: beyond its range is an infinity, while JSON keeps the double.
    MetricLog log(dir.path(), true);
    log.record(4, 1, "test", {{"loss", 1e300}});
    auto big = read_tensorboard_scalars(log.tensorboard()->file());
    ASSERT_EQ(big.size(), 1u);
    EXPECT_EQ(big[0].value, std::numeric_limits<float>::infinity());
    EXPECT_EQ(nlohmann::json::parse(lines_of(dir / "metrics.jsonl").back())["loss"].get<double>(), 1e300);
  }

  MetricLog resumed(dir.path(), true);
  resumed.truncate_after(2);
  ASSERT_NE(resumed.tensorboard()->file(), first_file);
  auto events = read_tensorboard_events(resumed.tensorboard()->file());
  ASSERT_EQ(events.size(), 2u);  // file_version, then the session start
  EXPECT_TRUE(events[1].session_start);
  EXPECT_EQ(events[1].step, 3);
}

TEST(MetricLog, WithoutTensorBoardNoEventFile) {
  ScratchDir dir("ml");
  {
    MetricLog log(dir.path(), false);
    EXPECT_EQ(log.tensorboard(), nullptr);
    log.record(1, 0, "train", {{"loss", 1}});
  }
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(entry.path().filename().string().find("tfevents"), std::string::npos);
}

}  // namespace
}  // namespace shoplens
