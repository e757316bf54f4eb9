// The one rule for every reader of a file that comes from outside (a flag, a manifest row, a folder
// entry): only regular files are opened for their bytes. Opening a FIFO for reading waits for a
// writer for ever, and a signal does not end that wait; a device may never end. So the type is
// checked with stat before the open, and again with fstat on the descriptor, which is opened
// O_NONBLOCK: a FIFO swapped in between returns at once instead of waiting (docs/DATA.md).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "shoplens/core/unique_fd.h"

namespace shoplens {

// "a directory", "a FIFO", "a socket", ... for stat's st_mode or a std::filesystem file type.
std::string file_type_name(mode_t mode);
std::string file_type_name(std::filesystem::file_type type);

// "symlink loop (Too many levels of symbolic links)" for ELOOP, else strerror's text.
std::string describe_errno(int error);

// "not a regular file (a FIFO)" for anything but a regular file, "" for one.
std::string not_regular_reason(mode_t mode);

// An open regular file, or why there is none. `problem` holds the reason without the path
// ("cannot read file: No such file or directory", "not a regular file (a FIFO)"); `not_regular`
// tells the two apart (the file exists but is not something to read); `error` is the errno of a
// file that could not be reached.
struct RegularFile {
  UniqueFd fd{-1};
  std::uint64_t size = 0;
  std::string problem;
  bool not_regular = false;
  int error = 0;
};

// Symlinks are followed unless `extra_flags` holds O_NOFOLLOW (for paths already resolved).
RegularFile open_regular_file(const std::filesystem::path& path, int extra_flags = 0);

// For readers that hand the path to a library which opens it itself (LibTorch's archive reader,
// std::ifstream): DataError "'PATH' is not a regular file (a FIFO)", or IoError when it cannot be
// reached at all.
void require_regular_file(const std::filesystem::path& path);

// Reads up to `size` bytes into `data`, fewer only at the end of the file; returns how many.
// DataError on a read error.
std::size_t read_fully(int fd, void* data, std::size_t size);

// Everything `fd` holds from its position to its end (`size_hint`: the size fstat saw).
std::string read_to_end(int fd, std::uint64_t size_hint);

}  // namespace shoplens
