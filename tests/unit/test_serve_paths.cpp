// JSON {"path"} requests may read only under --image-root: relative and absolute paths inside it
// resolve; "..", absolute paths elsewhere and symbolic links that leave it are misses, and so are
// missing files and folders, all alike (the HTTP answers are in test_serve_http.cpp).
#include <gtest/gtest.h>

#include "shoplens/core/errors.h"
#include "shoplens/serve/image_root.h"
#include "test_util.h"

namespace shoplens::serve {
namespace {

namespace fs = std::filesystem;

TEST(ServePaths, ResolvesInsideTheRootAndMissesEverythingElse) {
  testing::ScratchDir dir("serve-paths");
  const fs::path root = dir / "root";
  fs::create_directories(root / "a");
  testing::write_text(root / "a" / "x.jpg", "x");
  testing::write_text(dir / "secret.jpg", "s");
  fs::create_directory_symlink(dir.path(), root / "escape");
  const fs::path canon = fs::canonical(root);

  EXPECT_EQ(resolve_under_root(root, "a/x.jpg"), canon / "a" / "x.jpg");
  EXPECT_EQ(resolve_under_root(root, "a/../a/x.jpg"), canon / "a" / "x.jpg");
  EXPECT_EQ(resolve_under_root(root, (canon / "a" / "x.jpg").string()), canon / "a" / "x.jpg");

  for (const std::string& miss :
       std::vector<std::string>{"a/missing.jpg", "a", "../secret.jpg", (dir / "secret.jpg").string(),
                                "escape/secret.jpg", "/etc/passwd", "../root2/y.jpg"})
    EXPECT_EQ(resolve_under_root(root, miss), std::nullopt) << miss;
  EXPECT_THROW(resolve_under_root(root, ""), UsageError);
  EXPECT_THROW(resolve_under_root(root, std::string("a\0b", 3)), UsageError);
}

TEST(ServePaths, DotDotAfterAMissingFolderDoesNotFollowALinkOutOfTheRoot) {
  testing::ScratchDir dir("serve-paths-dotdot");
  const fs::path root = dir / "root";
  fs::create_directories(root);
  testing::write_text(dir / "secret.jpg", "s");
  fs::create_directory_symlink(dir.path(), root / "link");
  // Lexically "nope/../link/secret.jpg" is "link/secret.jpg", inside; the kernel follows "link" out.
  EXPECT_EQ(resolve_under_root(root, "nope/../link/secret.jpg"), std::nullopt);
  EXPECT_EQ(read_under_root(root, "nope/../link/secret.jpg", 1 << 20).outcome, RootFile::Outcome::kMiss);
}

TEST(ServePaths, ReadsTheFileOrSaysItIsTooLarge) {
  testing::ScratchDir dir("serve-paths-read");
  testing::write_text(dir / "x.png", "0123456789");
  const RootFile ok = read_under_root(dir.path(), "x.png", 10);
  EXPECT_EQ(ok.outcome, RootFile::Outcome::kRead);
  EXPECT_EQ(std::string(ok.bytes.begin(), ok.bytes.end()), "0123456789");
  EXPECT_EQ(read_under_root(dir.path(), "x.png", 9).outcome, RootFile::Outcome::kTooLarge);
  EXPECT_EQ(read_under_root(dir.path(), "y.png", 9).outcome, RootFile::Outcome::kMiss);
}

}  // namespace
}  // namespace shoplens::serve
