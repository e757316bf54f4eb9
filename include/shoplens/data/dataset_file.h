// Reading the files a manifest names. A manifest is input, not trusted: a row may name a folder,
// a FIFO (opening it for reading would block for ever), a device, a symlink loop, a huge file,
// or a symlink that leads out of the dataset (a row reading /etc/shadow "as an image"). Only
// regular files whose real path, after every symlink, lies inside the real dataset root are
// read, and only up to a size limit. Every refusal is a DataError whose text is the quarantine
// reason (docs/DATA.md, "what each bad input gets").
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "shoplens/core/regular_file.h"  // file_type_name, describe_errno: the one rule for every reader

namespace shoplens {

// The path with every symlink, "." and ".." resolved (realpath(3)), or a DataError:
// "cannot read file: No such file or directory", "cannot read file: symlink loop (...)".
std::filesystem::path real_path(const std::filesystem::path& path);

// Why a folder entry (not itself a folder) is not a file to read, or "" when it is one: the rule
// prepare's folder scan and the folder input of predict, score and evaluate share. Symlinks to
// files are followed; symlinks to folders are not ("symlink to a folder (not followed)"), so no
// loop is ever walked; a dangling link or a link loop gives "cannot read file: ...", a FIFO, socket
// or device "not a regular file (a FIFO)". Never opens the entry.
std::string folder_entry_problem(const std::filesystem::directory_entry& entry);

// The dataset root, resolved once to its real path (so a root that is itself a symlink, or
// spelled relative, with "./" or a trailing "/", names the same folder).
class DatasetRoot {
 public:
  // Throws DataError when the root cannot be resolved (`what` names where it came from).
  DatasetRoot(const std::filesystem::path& root, const std::string& what);
  const std::filesystem::path& real() const { return real_; }
  // True when `resolved` (a real path) lies strictly inside the real root.
  bool contains(const std::filesystem::path& resolved) const;
  // The bytes of `file` (relative to the working folder, as the manifest resolved it). Throws
  // DataError: cannot read file, path escapes root, not a regular file, file too large.
  std::vector<std::uint8_t> read(const std::filesystem::path& file, std::uint64_t max_bytes) const;

 private:
  std::filesystem::path real_;
};

}  // namespace shoplens
