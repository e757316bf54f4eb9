#include <gtest/gtest.h>

#include <array>
#include <map>

#include "shoplens/core/errors.h"
#include "shoplens/data/csv.h"
#include "shoplens/data/manifest.h"
#include "test_util.h"

namespace shoplens {
namespace {

ManifestOptions rooted(const std::string& root = "/data") {
  ManifestOptions o;
  o.root = root;
  return o;
}

TEST(Csv, QuotedFieldsEscapesAndLineNumbers) {
  auto rows = parse_csv("a,b\r\n\"x,1\",\"say \"\"hi\"\"\"\n\n\"multi\nline\",z\nlast,row");
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[1].fields, (std::vector<std::string>{"x,1", "say \"hi\""}));
  EXPECT_EQ(rows[1].line, 2u);
  EXPECT_EQ(rows[2].fields[0], "multi\nline");
  EXPECT_EQ(rows[2].line, 4u);
  EXPECT_EQ(rows[3].line, 6u);
  EXPECT_EQ(rows[3].fields[1], "row");
}

TEST(Csv, MalformedRecordsCarryAnError) {
  auto rows = parse_csv("a,b\n\"open,x\n");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_FALSE(rows[1].error.empty());
  rows = parse_csv("a,b\nx\"y,z\n");
  EXPECT_FALSE(rows[1].error.empty());
}

TEST(Csv, EscapeRoundTrips) {
  std::vector<std::string> fields{"plain", "with,comma", "with \"quote\"", "new\nline", ""};
  auto rows = parse_csv(csv_line(fields) + "\n");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].fields, fields);
}

// One table reads split names both ways: aliases parse, the first name is the one written.
TEST(Manifest, SplitNamesReadBothWays) {
  for (Split split : {Split::kTrain, Split::kVal, Split::kTest}) EXPECT_EQ(parse_split(split_name(split)), split);
  EXPECT_EQ(parse_split(" Validation "), Split::kVal);
  EXPECT_EQ(parse_split("dev"), Split::kVal);
  EXPECT_EQ(parse_split("TESTING"), Split::kTest);
  EXPECT_STREQ(split_name(*parse_split("training")), "train");
  EXPECT_EQ(parse_split("holdout"), std::nullopt);
  EXPECT_EQ(parse_split(""), std::nullopt);
  EXPECT_STREQ(split_name(static_cast<Split>(7)), "?");
}

TEST(Manifest, ParsesRowsLabelsSplitsAndMetadata) {
  std::string text =
      "id,path,label,split,source_channel,device_type\n"
      "a,img/a.jpg,good_image,train,studio,dslr\n"
      "b,img/b.jpg,blurry,val,,android\n"
      "c,img/c.jpg,blurry,test,mobile_app,\n";
  Manifest m = parse_manifest(text, "m.csv", rooted());
  ASSERT_EQ(m.records.size(), 3u);
  EXPECT_TRUE(m.rejected.empty());
  EXPECT_EQ(m.classes, (std::vector<std::string>{"blurry", "good_image"}));  // sorted
  EXPECT_EQ(m.records[0].label, 1);
  EXPECT_EQ(m.records[1].split, Split::kVal);
  EXPECT_EQ(m.records[2].split, Split::kTest);
  EXPECT_EQ(m.metadata_fields, (std::vector<std::string>{"source_channel", "device_type"}));
  EXPECT_EQ(m.records[1].metadata[0], "");  // missing kept as missing, row kept
  EXPECT_EQ(m.records[0].file, std::filesystem::path("/data/img/a.jpg"));
  EXPECT_EQ(m.records[2].line, 4u);
}

TEST(Manifest, RejectsBadRowsWithLineAndReason) {
  std::string text =
      "path,label,split\n"
      "ok.jpg,cat,train\n"
      "../escape.jpg,cat,train\n"
      "/etc/passwd,cat,train\n"
      "x.jpg,,train\n"
      ",cat,train\n"
      "y.jpg,cat,holdout\n"
      "z.jpg,cat\n"
      "ok.jpg,cat,train\n"
      "w.jpg,dog,val\n";
  Manifest m = parse_manifest(text, "m.csv", rooted());
  EXPECT_EQ(m.records.size(), 2u);
  ASSERT_EQ(m.rejected.size(), 7u);
  EXPECT_EQ(m.total_rows(), 9u);  // nothing dropped silently
  auto reason_at = [&](std::size_t line) {
    for (const auto& r : m.rejected)
      if (r.line == line) return r.reason;
    return std::string("<none>");
  };
  EXPECT_NE(reason_at(3).find("path escapes root"), std::string::npos);
  EXPECT_NE(reason_at(4).find("path escapes root"), std::string::npos);
  EXPECT_NE(reason_at(5).find("empty label"), std::string::npos);
  EXPECT_NE(reason_at(6).find("empty path"), std::string::npos);
  EXPECT_NE(reason_at(7).find("unknown split 'holdout'"), std::string::npos);
  EXPECT_NE(reason_at(8).find("expected 3 fields, found 2"), std::string::npos);
  EXPECT_NE(reason_at(9).find("duplicate id"), std::string::npos);
}

TEST(Manifest, FixedClassListRejectsUnknownLabelsWithSuggestion) {
  ManifestOptions o = rooted();
  o.classes = {"blurry", "good_image"};
  Manifest m = parse_manifest("path,label\na.jpg,blury\nb.jpg,good_image\n", "m.csv", o);
  ASSERT_EQ(m.rejected.size(), 1u);
  EXPECT_NE(m.rejected[0].reason.find("did you mean 'blurry'"), std::string::npos) << m.rejected[0].reason;
  EXPECT_EQ(m.records[0].label, 1);  // fixed order is kept, not re-sorted
}

TEST(Manifest, ColumnMappingAndMissingColumns) {
  ManifestOptions o = rooted();
  o.columns = {{"path", "file"}, {"label", "class"}};
  Manifest m = parse_manifest("file,class,extra\na.jpg,x,1\n", "m.csv", o);
  EXPECT_EQ(m.records.size(), 1u);
  EXPECT_EQ(m.metadata_fields, (std::vector<std::string>{"extra"}));
  try {
    parse_manifest("filename,label\na.jpg,x\n", "m.csv", rooted());
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("m.csv:1: no 'path' column"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("data.columns.path"), std::string::npos) << e.what();
  }
}

TEST(Manifest, EmptyDatasetsAreErrors) {
  EXPECT_THROW(parse_manifest("", "m.csv", rooted()), DataError);
  EXPECT_THROW(parse_manifest("path,label\n", "m.csv", rooted()), DataError);
  try {
    parse_manifest("path,label\n../x.jpg,a\n", "m.csv", rooted());
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("all 1 rows were rejected"), std::string::npos) << e.what();
  }
}

TEST(Manifest, SplitsAssignedStratifiedAndDeterministic) {
  std::string text = "path,label\n";
  for (int i = 0; i < 100; ++i) text += "a" + std::to_string(i) + ".jpg,a\n";
  for (int i = 0; i < 20; ++i) text += "b" + std::to_string(i) + ".jpg,b\n";
  Manifest m1 = parse_manifest(text, "m.csv", rooted());
  Manifest m2 = parse_manifest(text, "m.csv", rooted());
  int counts[2][3] = {};
  for (std::size_t i = 0; i < m1.records.size(); ++i) {
    EXPECT_EQ(m1.records[i].split, m2.records[i].split);
    counts[m1.records[i].label][static_cast<int>(m1.records[i].split)]++;
  }
  EXPECT_EQ(counts[0][1], 10);
  EXPECT_EQ(counts[0][2], 10);
  EXPECT_EQ(counts[1][1], 2);  // the small class is present in every split
  EXPECT_EQ(counts[1][2], 2);
}

TEST(Manifest, ImageFolderWithAndWithoutSplits) {
  testing::ScratchDir dir("imagefolder");
  testing::write_text(dir / "flat/cat/1.jpg", "x");
  testing::write_text(dir / "flat/cat/2.png", "x");
  testing::write_text(dir / "flat/dog/3.jpg", "x");
  testing::write_text(dir / "flat/dog/notes.txt", "x");
  testing::write_text(dir / "flat/stray.jpg", "x");
  Manifest flat = scan_image_folder(dir / "flat", {});
  EXPECT_EQ(flat.classes, (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(flat.records.size(), 3u);
  EXPECT_EQ(flat.rejected.size(), 2u);  // notes.txt and the stray file are reported
  EXPECT_EQ(flat.total_rows(), 5u);

  testing::write_text(dir / "split/train/cat/1.jpg", "x");
  testing::write_text(dir / "split/val/cat/2.jpg", "x");
  testing::write_text(dir / "split/test/dog/3.jpg", "x");
  Manifest split = load_dataset_input(dir / "split", {});
  ASSERT_EQ(split.records.size(), 3u);
  EXPECT_TRUE(split.had_split_column);
  EXPECT_EQ(split.records[0].split, Split::kTest);  // sorted traversal: test, train, val
  EXPECT_EQ(split.records[2].split, Split::kVal);
}

// ImageFolder with train/ and test/ only: val comes from train, stratified and seeded; test is untouched.
TEST(Manifest, TrainAndTestFoldersGetValidationCarvedFromTrain) {
  testing::ScratchDir dir("carve");
  for (int i = 0; i < 20; ++i) testing::write_text(dir / "ds/train/cat" / (std::to_string(i) + ".jpg"), "x");
  for (int i = 0; i < 10; ++i) testing::write_text(dir / "ds/train/dog" / (std::to_string(i) + ".jpg"), "x");
  testing::write_text(dir / "ds/train/rare/only.jpg", "x");
  for (int i = 0; i < 4; ++i) testing::write_text(dir / "ds/test/cat" / (std::to_string(i) + ".jpg"), "x");
  ManifestOptions options;
  options.val_fraction = 0.2;
  const Manifest m = load_dataset_input(dir / "ds", options);
  std::map<std::string, std::array<int, 3>> counts;
  for (const auto& r : m.records) counts[m.classes[r.label]][static_cast<int>(r.split)]++;
  EXPECT_EQ(counts["cat"], (std::array<int, 3>{16, 4, 4}));
  EXPECT_EQ(counts["dog"], (std::array<int, 3>{8, 2, 0}));
  EXPECT_EQ(counts["rare"], (std::array<int, 3>{1, 0, 0}));  // one row cannot be split: it stays for training
  EXPECT_EQ(m.val_carved_from_train, 6u);
  for (const auto& r : m.records)
    if (r.path.rfind("test/", 0) == 0) {
      EXPECT_EQ(r.split, Split::kTest) << r.path;
    }

  // The same rows every time, and another seed picks others.
  const Manifest again = load_dataset_input(dir / "ds", options);
  options.seed = 99;
  const Manifest reseeded = load_dataset_input(dir / "ds", options);
  std::vector<std::string> val, val_again, val_reseeded;
  for (std::size_t i = 0; i < m.records.size(); ++i) {
    if (m.records[i].split == Split::kVal) val.push_back(m.records[i].path);
    if (again.records[i].split == Split::kVal) val_again.push_back(again.records[i].path);
    if (reseeded.records[i].split == Split::kVal) val_reseeded.push_back(reseeded.records[i].path);
  }
  EXPECT_EQ(val, val_again);
  EXPECT_NE(val, val_reseeded);
}

TEST(Manifest, ValidationIsCarvedOnlyWhenTheInputHasNone) {
  ManifestOptions options = rooted();
  options.val_fraction = 0.5;
  const std::string train_test =
      "path,label,split\na.jpg,x,train\nb.jpg,x,train\nc.jpg,x,train\nd.jpg,x,train\ne.jpg,x,test\n";
  const Manifest carved = parse_manifest(train_test, "m.csv", options);
  EXPECT_EQ(carved.val_carved_from_train, 2u);

  const Manifest has_val = parse_manifest(train_test + "f.jpg,x,val\n", "m.csv", options);
  EXPECT_EQ(has_val.val_carved_from_train, 0u);
  int val = 0;
  for (const auto& r : has_val.records) val += r.split == Split::kVal;
  EXPECT_EQ(val, 1);  // the input's own val, nothing added

  options.val_fraction = 0;  // the user's way to keep every train row for training
  const Manifest kept = parse_manifest(train_test, "m.csv", options);
  EXPECT_EQ(kept.val_carved_from_train, 0u);
  for (const auto& r : kept.records) EXPECT_NE(r.split, Split::kVal);
}

TEST(Manifest, PathWithin) {
  EXPECT_TRUE(path_within("/data", "/data/a/b.jpg"));
  EXPECT_FALSE(path_within("/data", "/data/../etc/x"));
  EXPECT_FALSE(path_within("/data", "/database/x"));
  EXPECT_FALSE(path_within("/data", "/data"));
}

}  // namespace
}  // namespace shoplens
