// Reading the files a manifest names. A manifest is input, not trusted: a row may name a folder,
// a FIFO (opening it for reading would block for ever), a device, a symlink loop, a huge file,
// or a symlink that leads out of the dataset (a row reading /etc/shadow "as an image"). Only
// regular files whose real path, after every symlink, lies inside the real dataset root are
// read, and only up to a size limit. Every refusal is a DataError whose text is the quarantine
// reason (docs/DATA.md, "what each bad input gets").
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace shoplens {

// The path with every symlink, "." and ".." resolved (realpath(3)), or a DataError:
// "cannot read file: No such file or directory", "cannot read file: symlink loop (...)".
std::filesystem::path real_path(const std::filesystem::path& path);

// "a directory", "a FIFO", "a socket", ... for stat's st_mode.
std::string file_type_name(mode_t mode);
std::string file_type_name(std::filesystem::file_type type);

// "symlink loop (Too many levels of symbolic links)" for ELOOP, else strerror's text.
std::string describe_errno(int error);

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
