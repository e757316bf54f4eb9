#include "shoplens/data/dataset_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "shoplens/core/enum_names.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/unique_fd.h"

namespace shoplens {
namespace {

namespace fs = std::filesystem;

// Only regular files are read: a folder, FIFO, socket or device is never opened for its bytes.
void require_regular(const struct stat& st) {
  if (!S_ISREG(st.st_mode)) throw DataError("not a regular file (" + file_type_name(st.st_mode) + ")");
}

void require_size_within(std::uint64_t size, std::uint64_t max_bytes) {
  if (size > max_bytes)
    throw DataError("file too large: " + std::to_string(size) + " bytes, over the limit of " +
                    std::to_string(max_bytes) + " bytes (data.max_file_mb)");
}

// Reads at most `size` bytes: a file that grows while it is read is cut at the size checked; one
// that shrinks comes back short, and the decoder then reports it as truncated.
std::vector<std::uint8_t> read_up_to(int fd, std::uint64_t size) {
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw DataError("cannot read file: " + describe_errno(errno));
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  bytes.resize(done);
  return bytes;
}

}  // namespace

std::string describe_errno(int error) {
  if (error == ELOOP) return std::string("symlink loop (") + std::strerror(error) + ")";
  return std::strerror(error);
}

fs::path real_path(const fs::path& path) {
  std::unique_ptr<char, decltype(&std::free)> resolved(::realpath(path.c_str(), nullptr), &std::free);
  if (!resolved) throw DataError("cannot read file: " + describe_errno(errno));
  return fs::path(resolved.get());
}

namespace {

constexpr EnumName<fs::file_type> kFileTypeNames[] = {{fs::file_type::regular, "a regular file"},
                                                      {fs::file_type::directory, "a directory"},
                                                      {fs::file_type::fifo, "a FIFO"},
                                                      {fs::file_type::socket, "a socket"},
                                                      {fs::file_type::character, "a character device"},
                                                      {fs::file_type::block, "a block device"},
                                                      {fs::file_type::symlink, "a symlink"},
                                                      {fs::file_type::not_found, "missing"}};

fs::file_type file_type_of(mode_t mode) {
  if (S_ISREG(mode)) return fs::file_type::regular;
  if (S_ISDIR(mode)) return fs::file_type::directory;
  if (S_ISFIFO(mode)) return fs::file_type::fifo;
  if (S_ISSOCK(mode)) return fs::file_type::socket;
  if (S_ISCHR(mode)) return fs::file_type::character;
  if (S_ISBLK(mode)) return fs::file_type::block;
  if (S_ISLNK(mode)) return fs::file_type::symlink;
  return fs::file_type::unknown;
}

}  // namespace

std::string file_type_name(mode_t mode) { return file_type_name(file_type_of(mode)); }

std::string file_type_name(fs::file_type type) { return name_in(kFileTypeNames, type, "an unknown kind of file"); }

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

bool DatasetRoot::contains(const fs::path& resolved) const {
  auto r = real_.begin(), c = resolved.begin();
  for (; r != real_.end(); ++r, ++c) {
    if (r->empty()) continue;  // a trailing separator
    if (c == resolved.end() || *r != *c) return false;
  }
  return c != resolved.end();
}

std::vector<std::uint8_t> DatasetRoot::read(const fs::path& file, std::uint64_t max_bytes) const {
  const fs::path resolved = real_path(file);
  if (!contains(resolved))
    throw DataError("path escapes root: it resolves to " + resolved.string() + ", outside " + real_.string());
  // stat first, so a FIFO or a device is never opened; O_NONBLOCK and fstat again in case the
  // path was swapped for one in between (an open FIFO then returns at once instead of waiting
  // for a writer). O_NOFOLLOW: the resolved path has no symlink left, unless one was planted.
  struct stat st {};
  if (::stat(resolved.c_str(), &st) != 0) throw DataError("cannot read file: " + describe_errno(errno));
  require_regular(st);
  require_size_within(static_cast<std::uint64_t>(st.st_size), max_bytes);
  UniqueFd fd(::open(resolved.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | O_NOFOLLOW));
  if (fd.get() < 0) throw DataError("cannot read file: " + describe_errno(errno));
  if (::fstat(fd.get(), &st) != 0) throw DataError("cannot read file: " + describe_errno(errno));
  require_regular(st);
  require_size_within(static_cast<std::uint64_t>(st.st_size), max_bytes);
  return read_up_to(fd.get(), static_cast<std::uint64_t>(st.st_size));
}

}  // namespace shoplens
