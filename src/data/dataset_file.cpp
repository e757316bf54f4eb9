#include "shoplens/data/dataset_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <memory>

#include "shoplens/core/errors.h"
#include "shoplens/core/path_overlap.h"

namespace shoplens {
namespace {

namespace fs = std::filesystem;

void require_size_within(std::uint64_t size, std::uint64_t max_bytes) {
  if (size > max_bytes)
    throw DataError("file too large: " + std::to_string(size) + " bytes, over the limit of " +
                    std::to_string(max_bytes) + " bytes (data.max_file_mb)");
}

// Reads at most `size` bytes: a file that grows while it is read is cut at the size checked; one
// that shrinks comes back short, and the decoder then reports it as truncated.
std::vector<std::uint8_t> read_up_to(int fd, std::uint64_t size) {
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
  bytes.resize(read_fully(fd, bytes.data(), bytes.size()));
  return bytes;
}

}  // namespace

fs::path real_path(const fs::path& path) {
  std::unique_ptr<char, decltype(&std::free)> resolved(::realpath(path.c_str(), nullptr), &std::free);
  if (!resolved) throw DataError("cannot read file: " + describe_errno(errno));
  return fs::path(resolved.get());
}

std::string folder_entry_problem(const fs::directory_entry& e) {
  std::error_code ec;
  const fs::file_status own = e.symlink_status(ec);
  if (ec) return "cannot read file: " + describe_errno(ec.value());
  fs::file_status target = own;
  if (fs::is_symlink(own)) {
    target = fs::status(e.path(), ec);
    if (ec) return "cannot read file: " + describe_errno(ec.value());
    if (fs::is_directory(target)) return "symlink to a folder (not followed)";
  }
  if (!fs::is_regular_file(target)) return "not a regular file (" + file_type_name(target.type()) + ")";
  return "";
}

DatasetRoot::DatasetRoot(const fs::path& root, const std::string& what) {
  const fs::path spelled = root.empty() ? fs::path(".") : root;
  std::unique_ptr<char, decltype(&std::free)> resolved(::realpath(spelled.c_str(), nullptr), &std::free);
  if (!resolved)
    throw DataError("dataset root '" + spelled.string() + "' (" + what + ") cannot be used: " + describe_errno(errno));
  real_ = resolved.get();
  struct stat st {};
  if (::stat(real_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw DataError("dataset root '" + spelled.string() + "' (" + what + ") is not a folder");
}

bool DatasetRoot::contains(const fs::path& resolved) const { return path_inside(real_, resolved); }

std::vector<std::uint8_t> DatasetRoot::read(const fs::path& file, std::uint64_t max_bytes) const {
  const fs::path resolved = real_path(file);
  if (!contains(resolved))
    throw DataError("path escapes root: it resolves to " + resolved.string() + ", outside " + real_.string());
  // The one rule for every reader (core/regular_file.h): stat before open, never open a FIFO or
  // a device. O_NOFOLLOW: the resolved path has no symlink left, unless one was planted.
  const RegularFile opened = open_regular_file(resolved, O_NOFOLLOW);
  if (!opened.problem.empty()) throw DataError(opened.problem);
  require_size_within(opened.size, max_bytes);
  return read_up_to(opened.fd.get(), opened.size);
}

}  // namespace shoplens
