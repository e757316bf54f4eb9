// End-to-end: `shoplens prepare` on hostile input (issue 20, "Data"): rows naming a folder, a
// FIFO or a symlink loop, relative roots, names that are not UTF-8, oversized fields. The run
// succeeds and reports each bad row, or stops with a message naming the file and line.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include "image_test_util.h"
#include "prepare_test_util.h"
#include "shoplens/core/atomic_file.h"
#include "shoplens/data/csv.h"
#include "shoplens/data/image_io.h"
#include "test_util.h"

namespace shoplens {
namespace {

namespace fs = std::filesystem;
using testing::read_json;

void write_jpeg(const fs::path& file, int seed) { testing::write_picture_jpeg(file, 48, 40, seed); }

// dir/dataset: manifest.csv with 4 good rows and `extra` rows.
fs::path make_dataset(const testing::ScratchDir& dir, const std::string& extra) {
  const fs::path root = dir / "dataset";
  std::string csv = "id,path,label,split\n";
  for (int i = 0; i < 4; ++i) {
    write_jpeg(root / ("img/" + std::to_string(i) + ".jpg"), i);
    csv += "ok" + std::to_string(i) + ",img/" + std::to_string(i) + ".jpg," + (i % 2 ? "good" : "blurry") + ",train\n";
  }
  testing::write_text(root / "manifest.csv", csv + extra);
  return root;
}

// The quarantine.csv reason of each id.
std::map<std::string, std::string> quarantine_reasons(const fs::path& out) {
  std::map<std::string, std::string> reasons;
  const auto rows = parse_csv(read_file(out / "quarantine.csv"));
  for (std::size_t r = 1; r < rows.size(); ++r) reasons[rows[r].fields.at(1)] = rows[r].fields.at(4);
  return reasons;
}

TEST(E2ePrepareHostile, FolderFifoAndSymlinkLoopRowsAreQuarantinedAndTheRunSucceeds) {
  testing::ScratchDir dir("e2e-hostile");
  const fs::path root = make_dataset(dir,
                                     "folder,img/folder.jpg,good,train\n"
                                     "fifo,img/fifo.jpg,good,train\n"
                                     "loop,img/loop.jpg,good,train\n");
  fs::create_directories(root / "img/folder.jpg");
  ASSERT_EQ(::mkfifo((root / "img/fifo.jpg").c_str(), 0600), 0);
  fs::create_symlink("loop.jpg", root / "img/loop.jpg");
  // `timeout` only ends a run that blocks on the FIFO (the bug this guards against); a passing
  // run takes a second or two.
  const auto r = testing::run_shell("timeout 300 " + testing::shoplens_bin() + " prepare --input " +
                                    (root / "manifest.csv").string() + " --out " + (dir / "out").string() +
                                    " --storage-size 16 --threads 2 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto reasons = quarantine_reasons(dir / "out");
  EXPECT_EQ(reasons.at("folder"), "not a regular file (a directory)");
  EXPECT_EQ(reasons.at("fifo"), "not a regular file (a FIFO)");
  EXPECT_NE(reasons.at("loop").find("symlink loop"), std::string::npos) << reasons.at("loop");
  EXPECT_EQ(read_json(dir / "out/report.json")["kept"], 4);
}

TEST(E2ePrepareHostile, RunFromInsideTheDatasetFolderOrWithATrailingSlashRoot) {
  testing::ScratchDir dir("e2e-cwd");
  make_dataset(dir, "escape,../outside.jpg,good,train\n");
  write_jpeg(dir / "outside.jpg", 7);
  const std::string bin = testing::shoplens_bin();
  const auto inside = testing::run_shell("cd " + (dir / "dataset").string() + " && " + bin +
                                         " prepare --input manifest.csv --out ../out1 --storage-size 16 2>&1");
  ASSERT_EQ(inside.exit_code, 0) << inside.output;
  EXPECT_EQ(read_json(dir / "out1/report.json")["kept"], 4);
  EXPECT_EQ(quarantine_reasons(dir / "out1").size(), 1u);

  const auto slash =
      testing::run_shell("cd " + dir.path().string() + " && " + bin +
                         " prepare --input dataset/manifest.csv --root dataset/ --out out2 --storage-size 16 2>&1");
  ASSERT_EQ(slash.exit_code, 0) << slash.output;
  EXPECT_EQ(read_json(dir / "out2/report.json")["kept"], 4);
  EXPECT_EQ(quarantine_reasons(dir / "out2").at("escape").rfind("path escapes root", 0), 0u);
}

TEST(E2ePrepareHostile, NamesThatAreNotUtf8StillGiveEveryOutput) {
  testing::ScratchDir dir("e2e-latin1");
  const fs::path root = make_dataset(dir, "latin,img/0.jpg,caf\xE9,train\n");
  const fs::path out = dir / "shards-\xE9t\xE9";
  const auto r = testing::run_shoplens("prepare --input " + (root / "manifest.csv").string() + " --out '" +
                                       out.string() + "' --storage-size 16 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* f : {"dataset.json", "report.json", "config.json"}) EXPECT_NO_THROW(read_json(out / f)) << f;
  EXPECT_EQ(read_json(out / "config.json")["data"]["shards"], (dir / "shards-\\xE9t\\xE9").string());
  EXPECT_EQ(quarantine_reasons(out).at("latin"), "label is not valid UTF-8: 'caf\\xE9'");
}

TEST(E2ePrepareHostile, OversizedFieldsAreRowsAndAnOversizedHeaderStopsNamingTheLine) {
  testing::ScratchDir dir("e2e-oversized");
  const fs::path root = make_dataset(dir, "huge," + std::string(2u << 20, 'p') + ",good,train\n" +
                                              "long_label,img/1.jpg," + std::string(300, 'l') + ",train\n");
  const auto r = testing::run_shoplens("prepare --input " + (root / "manifest.csv").string() + " --out " +
                                       (dir / "out").string() + " --storage-size 16 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rows = parse_csv(read_file(dir / "out/quarantine.csv"));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[1].fields.at(0), "6");  // the line
  EXPECT_EQ(rows[1].fields.at(4), "malformed CSV: record longer than the limit of 1048576 bytes");
  EXPECT_EQ(rows[2].fields.at(4), "label longer than 256 bytes (300)");

  testing::write_text(dir / "bad.csv", "path,label," + std::string(2u << 20, 'h') + "\n");
  const auto bad = testing::run_shoplens("prepare --input " + (dir / "bad.csv").string() + " --out " +
                                         (dir / "out2").string() + " 2>&1");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.output.find("bad.csv:1: bad header: record longer than the limit"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace shoplens
