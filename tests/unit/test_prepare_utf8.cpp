// Names that are not valid UTF-8 (Latin-1 labels, file names from old archives) never cost the
// run: JSON can only hold Unicode, so prepare writes such bytes escaped as \xNN in its JSON files
// (the CSV files keep the raw bytes), and quarantines a row whose label (a class name) has them.
#include <gtest/gtest.h>

#include "image_test_util.h"
#include "prepare_test_util.h"
#include "shoplens/core/atomic_file.h"
#include "shoplens/core/utf8.h"
#include "shoplens/data/csv.h"
#include "shoplens/data/image_io.h"
#include "shoplens/data/prepare.h"
#include "test_util.h"

namespace shoplens {
namespace {

namespace fs = std::filesystem;

TEST(Utf8, TellsValidFromInvalid) {
  EXPECT_TRUE(is_valid_utf8(""));
  EXPECT_TRUE(is_valid_utf8("plain ascii"));
  EXPECT_TRUE(is_valid_utf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x93\xB7"));  // é € 📷
  EXPECT_FALSE(is_valid_utf8("caf\xE9"));                                   // Latin-1 é
  EXPECT_FALSE(is_valid_utf8("\xC3"));                                      // cut short
  EXPECT_FALSE(is_valid_utf8("\xC0\x80"));                                  // overlong NUL
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));                              // a UTF-16 surrogate
  EXPECT_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));                          // above U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\x80"));                                      // a lone continuation byte
}

TEST(Utf8, EscapesOnlyTheInvalidBytes) {
  EXPECT_EQ(escape_invalid_utf8("caf\xC3\xA9"), "caf\xC3\xA9");
  EXPECT_EQ(escape_invalid_utf8("caf\xE9.jpg"), "caf\\xE9.jpg");
  EXPECT_EQ(escape_invalid_utf8("\xC3\xA9\xC3"), "\xC3\xA9\\xC3");
  EXPECT_EQ(escape_invalid_utf8("\xF0\x9F\x93"), "\\xF0\\x9F\\x93");
  // Keys and values at any depth; the dump is valid UTF-8 and parses.
  nlohmann::json doc = {{"k\xFF", {"v\xFE", {{"deep", "x\x80"}}}}};
  const std::string text = dump_json_escaped(doc);
  EXPECT_TRUE(is_valid_utf8(text));
  const auto back = nlohmann::json::parse(text);
  EXPECT_EQ(back.at("k\\xFF").at(0), "v\\xFE");
  EXPECT_EQ(back.at("k\\xFF").at(1).at("deep"), "x\\x80");
}

void write_jpeg(const fs::path& file, int seed) { testing::write_picture_jpeg(file, 40, 32, seed); }

// Rows: good ones, a Latin-1 label, a Latin-1 file name (a fine image), a Latin-1 id on a broken
// file, a Latin-1 metadata value, all under a Latin-1 metadata column name and input folder.
struct Latin1Dataset {
  testing::ScratchDir dir{"prepare-utf8"};
  fs::path folder = dir / "d\xE9j\xE0";
  Latin1Dataset() {
    for (int i = 0; i < 4; ++i) write_jpeg(folder / ("img/" + std::to_string(i) + ".jpg"), i);
    write_jpeg(folder / "img/caf\xE9.jpg", 7);
    testing::write_text(folder / "img/broken.jpg", "not an image");
    std::string csv = "id,path,label,split,r\xE9gion\n";
    for (int i = 0; i < 4; ++i)
      csv += "ok" + std::to_string(i) + ",img/" + std::to_string(i) + ".jpg," + (i % 2 ? "good" : "blurry") +
             ",train,eu\n";
    csv += "latin_label,img/0.jpg,caf\xE9,train,eu\n";
    csv += "latin_path,img/caf\xE9.jpg,good,train,eu\n";
    csv += "latin_id_\xFE,img/broken.jpg,good,train,eu\n";
    csv += "latin_meta,img/1.jpg,good,train,M\xFCnchen\n";
    testing::write_text(folder / "manifest.csv", csv);
  }
  PrepareOptions options() const {
    PrepareOptions o;
    o.input = folder / "manifest.csv";
    o.out_dir = dir / "shards";
    o.storage_size = 16;
    o.records_per_shard = 3;
    return o;
  }
};

TEST(PrepareNonUtf8, LabelIsQuarantinedOtherNamesAreKeptAndEscapedInJson) {
  Latin1Dataset data;
  const PrepareReport r = prepare_dataset(data.options());
  EXPECT_EQ(r.total_rows, 8u);
  EXPECT_EQ(testing::quarantine_reason(r, "latin_label"), "manifest: label is not valid UTF-8: 'caf\\xE9'");
  EXPECT_EQ(testing::quarantine_reason(r, "latin_path"), "<kept>");
  EXPECT_EQ(testing::quarantine_reason(r, "latin_meta"), "<kept>");
  EXPECT_EQ(testing::quarantine_reason(r, "latin_id_\xFE"), "decode: not an image (unrecognised content)");
  EXPECT_EQ(r.kept, 6u);

  // Every JSON output parses, and names the bytes it could not hold as \xNN.
  const fs::path out = data.dir / "shards";
  for (const auto& e : fs::directory_iterator(out))
    if (e.path().extension() == ".json") {
      EXPECT_NO_THROW(testing::read_json(e.path())) << e.path();
    }
  const auto dataset = testing::read_json(out / "dataset.json");
  EXPECT_EQ(dataset["metadata_fields"][0], "r\\xE9gion");
  EXPECT_EQ(dataset["metadata_vocabulary"][0][0], "M\\xFCnchen");
  EXPECT_NE(dataset["prepare"]["input"].get<std::string>().find("d\\xE9j\\xE0"), std::string::npos);
  const auto report = testing::read_json(out / "report.json");
  EXPECT_EQ(report["metadata_missing"].count("r\\xE9gion"), 1u);

  // The CSV outputs keep the raw bytes.
  const std::string records = read_file(out / "records.csv");
  EXPECT_NE(records.find("img/caf\xE9.jpg"), std::string::npos);
  EXPECT_NE(records.find("M\xFCnchen"), std::string::npos);
  EXPECT_NE(read_file(out / "quarantine.csv").find("latin_id_\xFE"), std::string::npos);
}

TEST(PrepareNonUtf8, RerunReusesShardsAndReportsTheSameRawNames) {
  Latin1Dataset data;
  prepare_dataset(data.options());
  const std::string first = read_file(data.dir / "shards/quarantine.csv");
  const PrepareReport again = prepare_dataset(data.options());
  EXPECT_EQ(again.shards_written, 0u);
  EXPECT_EQ(testing::quarantine_reason(again, "latin_id_\xFE"), "decode: not an image (unrecognised content)");
  EXPECT_EQ(read_file(data.dir / "shards/quarantine.csv"), first);
}

TEST(PrepareNonUtf8, ImageFolderClassWithALatin1NameIsQuarantined) {
  testing::ScratchDir dir("imagefolder-utf8");
  write_jpeg(dir / "in/good/a.jpg", 1);
  write_jpeg(dir / "in/caf\xE9/b.jpg", 2);
  PrepareOptions o;
  o.input = dir / "in";
  o.out_dir = dir / "out";
  o.storage_size = 16;
  const PrepareReport r = prepare_dataset(o);
  EXPECT_EQ(r.kept, 1u);
  EXPECT_EQ(testing::quarantine_reason(r, "caf\xE9/b.jpg"), "manifest: label is not valid UTF-8: 'caf\\xE9'");
  EXPECT_NO_THROW(testing::read_json(dir / "out/report.json"));
}

}  // namespace
}  // namespace shoplens
