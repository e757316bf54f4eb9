// JSON {"path"} requests may read only under --image-root: relative and absolute paths inside it
// resolve; "..", absolute paths elsewhere and symbolic links that leave it are refused.
#include <gtest/gtest.h>

#include "shoplens/core/errors.h"
#include "shoplens/serve/http_frontend.h"
#include "test_util.h"

namespace shoplens::serve {
namespace {

namespace fs = std::filesystem;

TEST(ServePaths, ResolvesInsideTheRootAndRefusesEverythingElse) {
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
  EXPECT_EQ(resolve_under_root(root, "a/missing.jpg"), canon / "a" / "missing.jpg");  // 404 later, not 403

  EXPECT_THROW(resolve_under_root(root, "../secret.jpg"), UsageError);
  EXPECT_THROW(resolve_under_root(root, (dir / "secret.jpg").string()), UsageError);
  EXPECT_THROW(resolve_under_root(root, "escape/secret.jpg"), UsageError);
  EXPECT_THROW(resolve_under_root(root, "/etc/passwd"), UsageError);
  EXPECT_THROW(resolve_under_root(root, ""), UsageError);
  // A sibling whose name merely starts with the root's is outside it.
  fs::create_directories(dir / "root2");
  testing::write_text(dir / "root2" / "y.jpg", "y");
  EXPECT_THROW(resolve_under_root(root, "../root2/y.jpg"), UsageError);
}

}  // namespace
}  // namespace shoplens::serve
