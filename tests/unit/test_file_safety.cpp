// The library's two rules for files from outside (issue 45): only regular files are opened for
// reading (core/regular_file.h: a FIFO or device is refused before any open, by every reader),
// and an output may never be, contain, or lie inside an input (core/path_overlap.h). Then the
// inputs of predict, score and evaluate: a folder walk that turns a FIFO, a link loop or a
// dangling link into an error row instead of dropping it or aborting, and manifest rows that
// escape their root.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <map>

#include "prepare_test_util.h"
#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/path_overlap.h"
#include "shoplens/core/regular_file.h"
#include "shoplens/data/folder_walk.h"
#include "shoplens/data/image_io.h"
#include "shoplens/data/manifest.h"
#include "shoplens/infer/scorer.h"
#include "test_util.h"

namespace shoplens {
namespace {

namespace fs = std::filesystem;

void make_fifo(const fs::path& path) { ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0) << path; }

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// Every case below returns at once: a reader that opened the FIFO would wait for a writer for ever.
TEST(RegularFile, AFifoIsRefusedBeforeItIsOpened) {
  testing::ScratchDir dir("regular-file");
  make_fifo(dir / "pipe.csv");
  const RegularFile opened = open_regular_file(dir / "pipe.csv");
  EXPECT_LT(opened.fd.get(), 0);
  EXPECT_TRUE(opened.not_regular);
  EXPECT_EQ(opened.problem, "not a regular file (a FIFO)");

  EXPECT_THROW(read_file(dir / "pipe.csv"), DataError);
  EXPECT_NE(message_of([&] { read_file(dir / "pipe.csv"); }).find((dir / "pipe.csv").string()), std::string::npos);
  EXPECT_THROW(read_binary_file(dir / "pipe.csv"), DataError);
  EXPECT_THROW(require_regular_file(dir / "pipe.csv"), DataError);
  EXPECT_NE(message_of([&] { require_regular_file(dir / "pipe.csv"); }).find("not a regular file (a FIFO)"),
            std::string::npos);
}

TEST(RegularFile, FoldersDevicesAndMissingFilesAreRefusedEachWithItsReason) {
  testing::ScratchDir dir("regular-file");
  EXPECT_EQ(open_regular_file(dir.path()).problem, "not a regular file (a directory)");
  EXPECT_EQ(open_regular_file("/dev/null").problem, "not a regular file (a character device)");
  const RegularFile missing = open_regular_file(dir / "nope");
  EXPECT_FALSE(missing.not_regular);
  EXPECT_EQ(missing.problem, "cannot read file: " + describe_errno(ENOENT));
  EXPECT_THROW(read_file(dir / "nope"), IoError);  // as before: the file system refused
  EXPECT_THROW(read_file(dir.path()), DataError);  // was an empty string: a folder read as a file
  fs::create_symlink("loop", dir / "loop");
  EXPECT_NE(open_regular_file(dir / "loop").problem.find("symlink loop"), std::string::npos);
}

TEST(RegularFile, ReadsARegularFileWholeEvenWhenItGrewAfterItsSizeWasTaken) {
  testing::ScratchDir dir("regular-file");
  const std::string text(10000, 'x');
  testing::write_text(dir / "a.txt", text);
  EXPECT_EQ(read_file(dir / "a.txt"), text);
  const RegularFile opened = open_regular_file(dir / "a.txt");
  ASSERT_TRUE(opened.problem.empty()) << opened.problem;
  EXPECT_EQ(opened.size, text.size());
  EXPECT_EQ(read_to_end(opened.fd.get(), 10), text);  // a stale, smaller size
  EXPECT_EQ(read_binary_file(dir / "a.txt").size(), text.size());
}

TEST(PathOverlap, ComponentsNotCharacters) {
  EXPECT_TRUE(path_inside("/data", "/data/a/b.jpg"));
  EXPECT_TRUE(path_inside("/data/", "/data/a"));
  EXPECT_FALSE(path_inside("/data", "/database/x"));
  EXPECT_FALSE(path_inside("/data", "/data"));
  EXPECT_FALSE(path_inside("/data", "/data/"));
  EXPECT_FALSE(path_inside("/data/a", "/data"));
}

TEST(PathOverlap, SameInsideContainsAndApartThroughAnySpelling) {
  testing::ScratchDir dir("overlap");
  fs::create_directories(dir / "parent/run/checkpoints");
  testing::write_text(dir / "in.csv", "path\n");
  const fs::path run = dir / "parent/run";
  EXPECT_EQ(path_overlap(run, run), PathOverlap::kSame);
  EXPECT_EQ(path_overlap(dir / "parent/run/", run), PathOverlap::kSame);
  EXPECT_EQ(path_overlap(dir / "parent/./x/../run", run), PathOverlap::kSame);
  EXPECT_EQ(path_overlap(run / "checkpoints", run), PathOverlap::kOutputInsideInput);
  EXPECT_EQ(path_overlap(run / "new/deeper", run), PathOverlap::kOutputInsideInput);  // not there yet
  EXPECT_EQ(path_overlap(dir / "parent", run), PathOverlap::kOutputContainsInput);
  EXPECT_EQ(path_overlap(dir / "parent/model", run), PathOverlap::kApart);
  EXPECT_EQ(path_overlap(dir / "parent/run2", run), PathOverlap::kApart);
  // A symlink to the run, a relative spelling, a hard link to an input file.
  fs::create_directory_symlink(run, dir / "alias");
  EXPECT_EQ(path_overlap(dir / "alias", run), PathOverlap::kSame);
  EXPECT_EQ(path_overlap(dir / "alias/checkpoints/x", run), PathOverlap::kOutputInsideInput);
  fs::create_hard_link(dir / "in.csv", dir / "parent/same.csv");
  EXPECT_EQ(path_overlap(dir / "parent/same.csv", dir / "in.csv"), PathOverlap::kSame);
  const fs::path cwd = fs::current_path();
  fs::current_path(dir.path());
  EXPECT_EQ(path_overlap("in.csv", dir / "in.csv"), PathOverlap::kSame);
  fs::current_path(cwd);
}

TEST(PathOverlap, TheErrorNamesBothFlagsAndPathsAndIsAUsageError) {
  testing::ScratchDir dir("overlap");
  fs::create_directories(dir / "run");
  const std::string message = message_of([&] {
    require_output_apart({"--out", dir / "run"}, {{"--model", dir / "m"}, {"--run", dir / "run"}});
  });
  EXPECT_NE(message.find("--out '" + (dir / "run").string() + "' is the same as --run '" + (dir / "run").string()),
            std::string::npos)
      << message;
  EXPECT_THROW(require_output_apart({"--out", dir.path()}, {{"--run", dir / "run"}}), UsageError);
  EXPECT_NO_THROW(require_output_apart({"--out", dir / "model"}, {{"--run", dir / "run"}, {"--checkpoint", ""}}));
  EXPECT_NO_THROW(require_output_apart({"--out", ""}, {{"--run", dir / "run"}}));
}

TEST(FolderWalk, EveryEntryIsAFileOrAnErrorNothingIsDroppedNothingThrows) {
  testing::ScratchDir dir("walk");
  const fs::path root = dir / "images";
  testing::write_text(root / "a/1.jpg", "x");
  testing::write_text(root / "a/notes.txt", "x");
  testing::write_text(root / "b/deep/2.jpg", "x");
  make_fifo(root / "a/pipe.jpg");
  make_fifo(root / "a/pipe");  // no image extension: still not a file to skip silently
  fs::create_symlink("self.jpg", root / "b/self.jpg");
  fs::create_symlink("y.jpg", root / "b/x.jpg");
  fs::create_symlink("x.jpg", root / "b/y.jpg");
  fs::create_symlink("gone.jpg", root / "b/dangling.jpg");
  fs::create_directory_symlink(root, root / "b/up");  // a loop if it were followed
  fs::create_symlink(root / "a/1.jpg", root / "b/link.jpg");

  const FolderWalk walk = walk_image_folder(root);
  std::map<std::string, std::string> got;
  for (const auto& f : walk.files) got[f.relative.generic_string()] = f.problem;
  const std::map<std::string, std::string> expected = {
      {"a/1.jpg", ""},
      {"a/pipe", "not a regular file (a FIFO)"},
      {"a/pipe.jpg", "not a regular file (a FIFO)"},
      {"b/dangling.jpg", "cannot read file: " + describe_errno(ENOENT)},
      {"b/deep/2.jpg", ""},
      {"b/link.jpg", ""},
      {"b/self.jpg", "cannot read file: " + describe_errno(ELOOP)},
      {"b/up", "symlink to a folder (not followed)"},
      {"b/x.jpg", "cannot read file: " + describe_errno(ELOOP)},
      {"b/y.jpg", "cannot read file: " + describe_errno(ELOOP)}};
  EXPECT_EQ(got, expected);
  EXPECT_EQ(walk.not_images, 1u);  // notes.txt, counted
  EXPECT_TRUE(std::is_sorted(walk.files.begin(), walk.files.end(),
                             [](const auto& x, const auto& y) { return x.relative < y.relative; }));
}

TEST(FolderWalk, AFolderThatCannotBeListedIsAnEntryWithItsReason) {
  if (::geteuid() == 0) GTEST_SKIP() << "root lists every folder whatever its mode";
  testing::ScratchDir dir("walk");
  testing::write_text(dir / "images/a/1.jpg", "x");
  testing::write_text(dir / "images/locked/2.jpg", "x");
  fs::permissions(dir / "images/locked", fs::perms::none);
  const FolderWalk walk = walk_image_folder(dir / "images");
  fs::permissions(dir / "images/locked", fs::perms::owner_all);
  ASSERT_EQ(walk.files.size(), 2u);
  EXPECT_EQ(walk.files[1].relative, "locked");
  EXPECT_EQ(walk.files[1].problem, "cannot list folder: " + describe_errno(EACCES));
}

TEST(RootEscape, RelativeRowsMayNotLeaveTheRoot) {
  testing::ScratchDir dir("escape");
  fs::create_directories(dir / "data/img");
  EXPECT_EQ(root_escape_problem(dir / "data", dir / "data/img/a.jpg"), "");
  EXPECT_EQ(root_escape_problem(dir / "data", (dir / "data/img/../../etc/passwd").lexically_normal()),
            "path escapes root: it is outside " + (dir / "data").string());
  // The root spelled through a symlink: its real folder's files are inside it.
  fs::create_directory_symlink(dir / "data", dir / "alias");
  EXPECT_EQ(root_escape_problem(dir / "alias", dir / "data/img/a.jpg"), "");
}

// The inputs of predict, score and evaluate (open_score_rows).
class ScoreRowsHostile : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::write_picture_jpeg(dir_ / "images/good/1.jpg", 20, 20, 1);
    testing::write_picture_jpeg(dir_ / "images/bad/2.jpg", 20, 20, 2);
  }
  static std::unique_ptr<ScoreRows> open(const fs::path& input, const fs::path& root = {}) {
    RowsOptions o;
    o.root = root;
    auto rows = open_score_rows(input, o);
    rows->load_window(0, rows->size());  // the rows are streamed: hold all of them for the checks
    return rows;
  }
  testing::ScratchDir dir_{"rows-hostile"};
};

TEST_F(ScoreRowsHostile, AFolderWithALoopAndAFifoGivesErrorRowsForThemAndReadsTheRest) {
  fs::create_symlink("loop.jpg", dir_ / "images/bad/loop.jpg");
  make_fifo(dir_ / "images/good/pipe.jpg");
  const auto rows = open(dir_ / "images");
  ASSERT_EQ(rows->size(), 4u);  // 1.jpg, pipe.jpg, 2.jpg, loop.jpg: none dropped
  std::map<std::string, std::string> outcome;
  for (std::size_t r = 0; r < rows->size(); ++r) outcome[rows->id(r)] = message_of([&] { rows->image(r); });
  EXPECT_EQ(outcome["good/1.jpg"], "");
  EXPECT_EQ(outcome["bad/2.jpg"], "");
  EXPECT_NE(outcome["bad/loop.jpg"].find("symlink loop"), std::string::npos) << outcome["bad/loop.jpg"];
  EXPECT_NE(outcome["good/pipe.jpg"].find("not a regular file (a FIFO)"), std::string::npos);
  EXPECT_EQ(rows->label(1), "bad");
}

TEST_F(ScoreRowsHostile, ACsvRowNamingAFifoIsAnErrorRowAndTheInputItselfMustBeAFileOrFolder) {
  make_fifo(dir_ / "images/pipe.png");
  testing::write_text(dir_ / "images/list.csv", "path\ngood/1.jpg\npipe.png\n");
  const auto rows = open(dir_ / "images/list.csv");
  EXPECT_EQ(message_of([&] { rows->image(0); }), "");
  EXPECT_NE(message_of([&] { rows->image(1); }).find("not a regular file (a FIFO)"), std::string::npos);
  make_fifo(dir_ / "input.csv");
  EXPECT_THROW(open(dir_ / "input.csv"), UsageError);
  EXPECT_NE(message_of([&] { open(dir_ / "input.csv"); }).find("a FIFO"), std::string::npos);
}

TEST_F(ScoreRowsHostile, RelativeRowsThatEscapeTheRootAreErrorRowsAbsoluteRowsAreRead) {
  testing::write_picture_jpeg(dir_ / "outside.jpg", 20, 20, 3);
  testing::write_text(dir_ / "images/list.csv", "path\ngood/1.jpg\n../outside.jpg\ngood/../../outside.jpg\n" +
                                                    (dir_ / "outside.jpg").string() + "\n");
  const auto rows = open(dir_ / "images/list.csv");
  ASSERT_EQ(rows->size(), 4u);
  EXPECT_EQ(message_of([&] { rows->image(0); }), "");
  EXPECT_NE(message_of([&] { rows->image(1); }).find("path escapes root"), std::string::npos);
  EXPECT_NE(message_of([&] { rows->image(2); }).find("path escapes root"), std::string::npos);
  EXPECT_EQ(message_of([&] { rows->image(3); }), "");  // an absolute row names its file itself
}

}  // namespace
}  // namespace shoplens
