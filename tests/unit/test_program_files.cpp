// Files shipped with the program (core/program_files.h): found from the binary's place, never from
// the working directory.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "shoplens/core/errors.h"
#include "shoplens/core/program_files.h"
#include "test_util.h"

namespace shoplens {
namespace {

namespace fs = std::filesystem;

bool holds(const std::vector<fs::path>& folders, const fs::path& folder) {
  return std::find(folders.begin(), folders.end(), folder) != folders.end();
}

TEST(ProgramFiles, InstalledAndBuildTreeLayoutsAreBothSearched) {
  ::unsetenv("SHOPLENS_DATA_DIR");
  const auto installed = shipped_file_folders("/opt/shoplens/bin/shoplens");
  EXPECT_TRUE(holds(installed, "/opt/shoplens/share/shoplens"));
  const auto build_tree = shipped_file_folders("/home/me/shoplens/build/release/bin/shoplens");
  EXPECT_TRUE(holds(build_tree, "/home/me/shoplens"));
  const auto at_root = shipped_file_folders("/shoplens");  // a parent walk that reaches / stops there
  EXPECT_FALSE(at_root.empty());
}

TEST(ProgramFiles, TheEnvironmentsFolderIsSearchedFirst) {
  ::setenv("SHOPLENS_DATA_DIR", "/srv/shoplens-data", 1);
  const auto folders = shipped_file_folders("/opt/shoplens/bin/shoplens");
  ::unsetenv("SHOPLENS_DATA_DIR");
  ASSERT_FALSE(folders.empty());
  EXPECT_EQ(folders.front(), fs::path("/srv/shoplens-data"));
}

// The test binary lives in the build tree, like the program: the checkout's files are found from
// any working directory.
TEST(ProgramFiles, TheShippedPriceTableIsFoundWhateverTheWorkingDirectory) {
  ::unsetenv("SHOPLENS_DATA_DIR");
  const fs::path before = fs::current_path();
  fs::current_path(fs::temp_directory_path());
  const fs::path found = shipped_file("configs/prices.json");
  fs::current_path(before);
  EXPECT_TRUE(fs::equivalent(found, fs::path(testing::source_dir()) / "configs/prices.json")) << found;
}

TEST(ProgramFiles, AMissingShippedFileNamesItAndWhereItLooked) {
  try {
    shipped_file("configs/no-such-table.json");
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("configs/no-such-table.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("SHOPLENS_DATA_DIR"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace shoplens
