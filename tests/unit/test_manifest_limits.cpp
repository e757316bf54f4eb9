// Field and line size limits of the manifest reader: an oversized field or line in a data row is
// a quarantined row naming its line; an oversized header is a manifest error naming file and line.
#include <gtest/gtest.h>

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
