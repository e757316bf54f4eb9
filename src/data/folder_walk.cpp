#include "shoplens/data/folder_walk.h"

#include <algorithm>

#include "shoplens/core/errors.h"
#include "shoplens/data/dataset_file.h"
#include "shoplens/data/image_io.h"

namespace shoplens {
namespace fs = std::filesystem;

namespace {

std::string cannot_list(const std::error_code& ec) { return "cannot list folder: " + describe_errno(ec.value()); }

// One entry of a listed folder: a subfolder to descend into, a file to list, or one only counted.
void visit(const fs::directory_entry& entry, const fs::path& relative, std::vector<fs::path>& pending,
           FolderWalk& walk) {
  std::error_code ec;
  if (fs::is_directory(entry.symlink_status(ec)) && !ec) {
    pending.push_back(relative);
    return;
  }
  const std::string problem = folder_entry_problem(entry);
  if (problem.empty() && format_from_extension(entry.path()) == ImageFormat::kUnknown) {
    ++walk.not_images;  // a regular file that is not an image, skipped as torchvision skips it
    return;
  }
  walk.files.push_back({relative, problem});
}

}  // namespace

FolderWalk walk_image_folder(const fs::path& dir) {
  FolderWalk walk;
  std::vector<fs::path> pending{fs::path()};  // folders still to list, relative to `dir`
  while (!pending.empty()) {
    const fs::path folder = pending.back();
    pending.pop_back();
    std::error_code ec;
    fs::directory_iterator it(dir / folder, ec);
    if (ec && folder.empty()) throw IoError("cannot list folder '" + dir.string() + "': " + describe_errno(ec.value()));
    if (ec) {
      walk.files.push_back({folder, cannot_list(ec)});
      continue;
    }
    for (; it != fs::directory_iterator(); it.increment(ec)) visit(*it, folder / it->path().filename(), pending, walk);
    if (ec) walk.files.push_back({folder, cannot_list(ec)});
  }
  std::sort(walk.files.begin(), walk.files.end(),
            [](const WalkedFile& a, const WalkedFile& b) { return a.relative < b.relative; });
  return walk;
}

}  // namespace shoplens
