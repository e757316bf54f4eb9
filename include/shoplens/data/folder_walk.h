// The files of a folder tree, listed without ever throwing on one entry: the folder input of
// predict, score and evaluate. A symlink loop, a FIFO, a dangling link or a folder that cannot be
// listed is an entry with its problem (the caller makes it an error row), never an aborted walk
// and never a silently missing file (docs/DATA.md, "what each bad input gets").
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

namespace shoplens {

struct WalkedFile {
  std::filesystem::path relative;  // to the walked folder
  std::string problem;             // "" for an image file to read, else why it cannot be read
};

struct FolderWalk {
  std::vector<WalkedFile> files;  // sorted by relative path
  std::size_t not_images = 0;     // regular files without an image extension: counted, not listed
};

// Descends into every real subfolder (symlinks to folders are not followed, so no loop is walked;
// they are listed with their problem). Lists every image-extension file, and every entry that is
// neither a folder nor a regular file with folder_entry_problem's reason (a FIFO, socket, device,
// dangling link, link loop, symlink to a folder), and every subfolder that cannot be listed
// ("cannot list folder: Permission denied"). IoError only when `dir` itself cannot be listed.
FolderWalk walk_image_folder(const std::filesystem::path& dir);

}  // namespace shoplens
