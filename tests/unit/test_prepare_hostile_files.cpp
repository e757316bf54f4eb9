// prepare on rows that name something other than an image file inside the dataset: a folder, a
// FIFO, a symlink loop, a file over the size limit, symlinks that lead out of the dataset root.
// Each becomes a quarantined row with its reason, and the run goes on with the valid images.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include "image_test_util.h"
#include "prepare_test_util.h"
#include "shoplens/core/atomic_file.h"
#include "shoplens/data/image_io.h"
#include "shoplens/data/prepare.h"
#include "test_util.h"

namespace shoplens {
namespace {

namespace fs = std::filesystem;

void write_jpeg(const fs::path& file, int seed) { testing::write_picture_jpeg(file, 48, 40, seed); }

// dir/data is the dataset root with four valid images; dir/outside holds a valid image that no
// row may read. Tests add hostile rows with add_row().
struct HostileDataset {
  testing::ScratchDir dir{"prepare-hostile"};
  fs::path root = dir / "data";
  std::string csv = "id,path,label,split\n";

  HostileDataset() {
    for (int i = 0; i < 4; ++i) add_row("ok" + std::to_string(i), "img/ok" + std::to_string(i) + ".jpg", i);
    write_jpeg(dir / "outside/secret.jpg", 9);
  }
  // A row for `path`; with seed >= 0 also a valid image there.
  void add_row(const std::string& id, const std::string& path, int seed = -1) {
    if (seed >= 0) write_jpeg(root / path, seed);
    csv += id + "," + path + "," + (seed % 2 ? "good" : "blurry") + ",train\n";
  }
  PrepareReport prepare(std::uint64_t max_file_bytes = 64u << 20) {
    testing::write_text(root / "manifest.csv", csv);
    PrepareOptions o = testing::prepare_options_for(root / "manifest.csv", dir / "shards", 24, 2);
    o.max_file_bytes = max_file_bytes;
    return prepare_dataset(o);
  }
};

void expect_valid_rows_kept(const PrepareReport& r) {
  EXPECT_EQ(r.kept + r.quarantined.size(), r.total_rows);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(testing::quarantine_reason(r, "ok" + std::to_string(i)), "<kept>") << i;
}

TEST(PrepareHostileFiles, RowNamingADirectoryIsQuarantined) {
  HostileDataset data;
  fs::create_directories(data.root / "img/folder.jpg");
  data.add_row("folder", "img/folder.jpg");
  const PrepareReport r = data.prepare();
  expect_valid_rows_kept(r);
  EXPECT_EQ(testing::quarantine_reason(r, "folder"), "decode: not a regular file (a directory)");
}

TEST(PrepareHostileFiles, RowNamingAFifoIsQuarantinedWithoutOpeningIt) {
  HostileDataset data;
  ASSERT_EQ(::mkfifo((data.root / "img/pipe.jpg").c_str(), 0600), 0);
  data.add_row("pipe", "img/pipe.jpg");
  const PrepareReport r = data.prepare();
  expect_valid_rows_kept(r);
  EXPECT_EQ(testing::quarantine_reason(r, "pipe"), "decode: not a regular file (a FIFO)");
}

TEST(PrepareHostileFiles, SymlinkLoopIsQuarantined) {
  HostileDataset data;
  fs::create_symlink("loop_b.jpg", data.root / "img/loop_a.jpg");
  fs::create_symlink("loop_a.jpg", data.root / "img/loop_b.jpg");
  data.add_row("loop", "img/loop_a.jpg");
  const PrepareReport r = data.prepare();
  expect_valid_rows_kept(r);
  EXPECT_NE(testing::quarantine_reason(r, "loop").find("decode: cannot read file: symlink loop"), std::string::npos)
      << testing::quarantine_reason(r, "loop");
}

TEST(PrepareHostileFiles, FileOverTheSizeLimitIsQuarantinedWithTheLimit) {
  HostileDataset data;
  data.add_row("big", "img/big.jpg", 5);
  const std::uint64_t size = fs::file_size(data.root / "img/big.jpg");
  data.add_row("small_enough", "img/small.bmp");  // a 16x16 BMP: 822 bytes, well under the limit
  const testing::Bytes bmp = testing::bmp_bytes(testing::test_picture(16, 16, 1), 24, false);
  write_file_atomic(data.root / "img/small.bmp", std::string(bmp.begin(), bmp.end()));
  // Every valid JPEG here is over 1000 bytes; the limit is set just under the big one.
  const PrepareReport r = data.prepare(size - 1);
  EXPECT_EQ(testing::quarantine_reason(r, "big"), "decode: file too large: " + std::to_string(size) +
                                                      " bytes, over the limit of " + std::to_string(size - 1) +
                                                      " bytes (data.max_file_mb)");
  EXPECT_EQ(testing::quarantine_reason(r, "small_enough"), "<kept>");
}

TEST(PrepareHostileFiles, SymlinkOutOfTheRootIsQuarantined) {
  HostileDataset data;
  fs::create_symlink(data.dir / "outside/secret.jpg", data.root / "img/absolute_link.jpg");
  fs::create_symlink("../../outside/secret.jpg", data.root / "img/relative_link.jpg");
  fs::create_symlink(data.dir / "outside", data.root / "img/linked_folder");
  fs::create_symlink("/etc/passwd", data.root / "img/passwd.jpg");
  fs::create_symlink("ok0.jpg", data.root / "img/inside_link.jpg");  // stays inside: fine
  data.add_row("absolute_link", "img/absolute_link.jpg");
  data.add_row("relative_link", "img/relative_link.jpg");
  data.add_row("linked_folder", "img/linked_folder/secret.jpg");
  data.add_row("passwd", "img/passwd.jpg");
  data.add_row("inside_link", "img/inside_link.jpg");
  const PrepareReport r = data.prepare();
  expect_valid_rows_kept(r);
  for (const char* id : {"absolute_link", "relative_link", "linked_folder", "passwd"})
    EXPECT_EQ(testing::quarantine_reason(r, id).rfind("decode: path escapes root", 0), 0u)
        << id << ": " << testing::quarantine_reason(r, id);
  EXPECT_EQ(testing::quarantine_reason(r, "inside_link"), "<kept>");
}

TEST(PrepareHostileFiles, ImageFolderReportsEveryEntryThatIsNotAnImageFile) {
  testing::ScratchDir dir("imagefolder-hostile");
  const fs::path root = dir / "folder";
  write_jpeg(root / "cat/a.jpg", 1);
  write_jpeg(root / "dog/b.jpg", 2);
  write_jpeg(dir / "outside.jpg", 3);
  ASSERT_EQ(::mkfifo((root / "cat/pipe.jpg").c_str(), 0600), 0);
  fs::create_symlink("loop.jpg", root / "cat/loop.jpg");
  fs::create_symlink(dir / "outside.jpg", root / "dog/escape.jpg");
  fs::create_symlink("missing.jpg", root / "dog/dangling.jpg");
  fs::create_directory_symlink(dir.path(), root / "dog/folder_link");
  PrepareOptions o;
  o.input = root;
  o.out_dir = dir / "shards";
  o.storage_size = 24;
  const PrepareReport r = prepare_dataset(o);
  EXPECT_EQ(r.total_rows, 7u);
  EXPECT_EQ(r.kept, 2u);
  EXPECT_EQ(testing::quarantine_reason(r, "cat/pipe.jpg"), "manifest: not a regular file (a FIFO)");
  EXPECT_NE(testing::quarantine_reason(r, "cat/loop.jpg").find("symlink loop"), std::string::npos)
      << testing::quarantine_reason(r, "cat/loop.jpg");
  EXPECT_EQ(testing::quarantine_reason(r, "dog/escape.jpg").rfind("decode: path escapes root", 0), 0u)
      << testing::quarantine_reason(r, "dog/escape.jpg");
  EXPECT_NE(testing::quarantine_reason(r, "dog/dangling.jpg").find("No such file"), std::string::npos)
      << testing::quarantine_reason(r, "dog/dangling.jpg");
  EXPECT_EQ(testing::quarantine_reason(r, "dog/folder_link"), "manifest: symlink to a folder (not followed)");
}

}  // namespace
}  // namespace shoplens
