#include "shoplens/core/program_files.h"

#include <cstdlib>

#include "shoplens/core/errors.h"

namespace shoplens {

namespace fs = std::filesystem;

fs::path running_program() {
  std::error_code ec;
  fs::path program = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw IoError("cannot find the running program (/proc/self/exe): " + ec.message());
  return program;
}

std::vector<fs::path> shipped_file_folders(const fs::path& program) {
  std::vector<fs::path> folders;
  if (const char* dir = std::getenv("SHOPLENS_DATA_DIR"); dir && *dir) folders.emplace_back(dir);
  // bin/ of an install is one level below PREFIX; build/<preset>/bin/ is three below the checkout.
  fs::path folder = program.parent_path();
  for (int level = 0; level < 4 && !folder.empty(); ++level) {
    folders.push_back(folder / "share" / "shoplens");
    folders.push_back(folder);
    if (folder == folder.root_path()) break;
    folder = folder.parent_path();
  }
  return folders;
}

fs::path shipped_file(const std::string& relative) {
  const std::vector<fs::path> folders = shipped_file_folders(running_program());
  std::string searched;
  for (const fs::path& folder : folders) {
    std::error_code ec;
    if (fs::is_regular_file(folder / relative, ec)) return folder / relative;
    searched += (searched.empty() ? "" : ", ") + folder.string();
  }
  throw UsageError("cannot find the shipped file " + relative + " beside the program (looked in " + searched +
                   "; SHOPLENS_DATA_DIR names another folder that holds it)");
}

}  // namespace shoplens
