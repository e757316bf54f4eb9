// Field and line size limits of the manifest reader: an oversized field or line in a data row is
// a quarantined row naming its line; an oversized header is a manifest error naming file and line.
#include <gtest/gtest.h>

#include <random>
#include <sstream>
#include <streambuf>

#include "shoplens/core/errors.h"
#include "shoplens/data/csv.h"
#include "shoplens/data/manifest.h"

namespace shoplens {
namespace {

ManifestOptions rooted() {
  ManifestOptions o;
  o.root = "/data";
  return o;
}

std::string reason_at(const Manifest& m, std::size_t line) {
  for (const auto& r : m.rejected)
    if (r.line == line) return r.reason;
  return "<kept>";
}

TEST(Csv, RecordOverTheLengthLimitIsMarkedAndItsBytesAreNotKept) {
  const std::string text = "a,b\n" + std::string(40, 'x') + ",y\n\"quoted\n" + std::string(40, 'q') + "\",z\nc,d\n";
  const auto rows = parse_csv(text, /*max_record_bytes=*/16);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[1].line, 2u);
  EXPECT_EQ(rows[1].error, "record longer than the limit of 16 bytes");
  EXPECT_TRUE(rows[1].fields.empty());
  EXPECT_EQ(rows[2].line, 3u);  // a quoted record over two lines
  EXPECT_EQ(rows[2].error, "record longer than the limit of 16 bytes");
  EXPECT_EQ(rows[3].line, 5u);
  EXPECT_EQ(rows[3].fields, (std::vector<std::string>{"c", "d"}));
}

std::vector<CsvRecord> stream_all(const std::string& text, std::size_t max_record, std::size_t block,
                                  std::size_t* peak = nullptr) {
  std::istringstream in(text);
  CsvStreamReader reader(in, "t.csv", max_record, block);
  std::vector<CsvRecord> all;
  for (auto some = reader.next(); !some.empty(); some = reader.next()) all.insert(all.end(), some.begin(), some.end());
  if (peak) *peak = reader.peak_buffered_bytes();
  return all;
}

void expect_same_records(const std::vector<CsvRecord>& want, const std::vector<CsvRecord>& got,
                         const std::string& context) {
  ASSERT_EQ(want.size(), got.size()) << context;
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(want[i].line, got[i].line) << context << " record " << i;
    EXPECT_EQ(want[i].fields, got[i].fields) << context << " record " << i;
    EXPECT_EQ(want[i].error, got[i].error) << context << " record " << i;
  }
}

// Read a block at a time, the stream gives parse_csv's records exactly, wherever the blocks cut:
// quotes (doubled, stray, after a closing quote), CR, LF and CRLF line ends inside and outside
// quotes, a BOM, blank lines, oversized records, and a text that ends inside a quote or a record.
TEST(CsvStream, GivesTheRecordsParseCsvGivesForAnyBlockSize) {
  const std::string pieces[] = {
      "a", "bc", ",", "\"", "\"\"", "\n", "\r", "\r\n", "x\"y", std::string(20, 'z'), "\xEF\xBB\xBF"};
  std::mt19937 rng(7);
  for (int trial = 0; trial < 400; ++trial) {
    std::string text = trial % 5 == 0 ? "\xEF\xBB\xBF" : "";
    const int n = static_cast<int>(rng() % 40);
    for (int k = 0; k < n; ++k) text += pieces[rng() % std::size(pieces)];
    const std::size_t max_record = 8 + rng() % 24;
    const auto want = parse_csv(text, max_record);
    for (std::size_t block : {1u, 2u, 3u, 5u, 16u, 4096u})
      expect_same_records(want, stream_all(text, max_record, block),
                          "trial " + std::to_string(trial) + " block " + std::to_string(block));
  }
  const std::string fixed = "a,b\r\n\"x,1\",\"say \"\"hi\"\"\"\n\n\"multi\nline\",z\nlast,row";
  expect_same_records(parse_csv(fixed), stream_all(fixed, kMaxCsvRecordBytes, 3), "fixed");
}

// A stream that makes `size` bytes of one label on the fly: nothing holds the whole text.
class LongLabelStream : public std::streambuf {
 public:
  explicit LongLabelStream(std::size_t label_bytes) : left_(label_bytes) {
    head_ = "path,label\na.jpg,x\nb.jpg,";
    setg(head_.data(), head_.data(), head_.data() + head_.size());
  }

 protected:
  int_type underflow() override {
    if (left_ > 0) {
      const std::size_t n = std::min(left_, chunk_.size());
      left_ -= n;
      setg(chunk_.data(), chunk_.data(), chunk_.data() + n);
    } else if (!tail_sent_) {
      tail_sent_ = true;
      setg(tail_.data(), tail_.data(), tail_.data() + tail_.size());
    } else {
      return traits_type::eof();
    }
    return traits_type::to_int_type(*gptr());
  }

 private:
  std::string head_, chunk_ = std::string(1 << 16, 'L'), tail_ = "\nc.jpg,y\n";
  std::size_t left_;
  bool tail_sent_ = false;
};

// A 256 MiB label streams past in about one record limit of memory, and the rows around it keep
// their line numbers (parse_csv over the whole text would first need all 256 MiB in memory).
TEST(CsvStream, AnOversizedRecordIsSkippedWithoutBeingHeld) {
  LongLabelStream source(256u << 20);
  std::istream in(&source);
  CsvStreamReader reader(in, "m.csv");
  std::vector<CsvRecord> all;
  for (auto some = reader.next(); !some.empty(); some = reader.next()) all.insert(all.end(), some.begin(), some.end());
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[2].line, 3u);
  EXPECT_EQ(all[2].error, "record longer than the limit of 1048576 bytes");
  EXPECT_EQ(all[3].line, 4u);
  EXPECT_EQ(all[3].fields, (std::vector<std::string>{"c.jpg", "y"}));
  EXPECT_LE(reader.peak_buffered_bytes(), 2 * kMaxCsvRecordBytes);
}

TEST(ManifestLimits, LabelOver256BytesIsQuarantinedWithItsLine) {
  const std::string text = "path,label\na.jpg," + std::string(256, 'l') + "\nb.jpg," + std::string(257, 'l') + "\n";
  const Manifest m = parse_manifest(text, "m.csv", rooted());
  EXPECT_EQ(m.records.size(), 1u);
  EXPECT_EQ(reason_at(m, 3), "label longer than 256 bytes (257)");
}

TEST(ManifestLimits, PathIdAndMetadataOverTheirLimitsAreQuarantined) {
  const std::string text =
      "id,path,label,shop\n"
      "ok,a.jpg,x,s\n"
      "p," +
      std::string(4097, 'p') + ",x,s\n" + std::string(4097, 'i') +
      ",b.jpg,x,s\n"
      "m,c.jpg,x," +
      std::string(1025, 'm') + "\n";
  const Manifest m = parse_manifest(text, "m.csv", rooted());
  EXPECT_EQ(m.records.size(), 1u);
  EXPECT_EQ(reason_at(m, 3), "path longer than 4096 bytes (4097)");
  EXPECT_EQ(reason_at(m, 4), "id longer than 4096 bytes (4097)");
  EXPECT_EQ(reason_at(m, 5), "metadata 'shop' longer than 1024 bytes (1025)");
  // The rejected row does not carry the oversized text into the reports.
  for (const auto& r : m.rejected) {
    EXPECT_LE(r.id.size(), 4096u);
    EXPECT_LE(r.path.size(), 4096u);
  }
}

TEST(ManifestLimits, HundredMegabyteLabelIsQuarantinedAsAnOverlongLine) {
  std::string text = "path,label\na.jpg,x\nb.jpg,";
  text.append(100u << 20, 'L');
  text += "\nc.jpg,y\n";
  const Manifest m = parse_manifest(text, "m.csv", rooted());
  EXPECT_EQ(m.records.size(), 2u);
  ASSERT_EQ(m.rejected.size(), 1u);
  EXPECT_EQ(m.rejected[0].line, 3u);
  EXPECT_EQ(m.rejected[0].reason, "malformed CSV: record longer than the limit of 1048576 bytes");
  EXPECT_EQ(m.records[1].line, 4u);
}

TEST(ManifestLimits, OverlongHeaderIsAManifestErrorNamingFileAndLine) {
  const std::string long_header = "path,label," + std::string(2u << 20, 'h') + "\na.jpg,x,1\n";
  try {
    parse_manifest(long_header, "m.csv", rooted());
    FAIL() << "an oversized header was accepted";
  } catch (const DataError& e) {
    EXPECT_EQ(std::string(e.what()), "m.csv:1: bad header: record longer than the limit of 1048576 bytes");
  }
  const std::string long_name = "path,label," + std::string(300, 'n') + "\na.jpg,x,1\n";
  try {
    parse_manifest(long_name, "m.csv", rooted());
    FAIL() << "an oversized column name was accepted";
  } catch (const DataError& e) {
    EXPECT_EQ(std::string(e.what()), "m.csv:1: column 3's name is longer than 256 bytes (300)");
  }
}

}  // namespace
}  // namespace shoplens
