#include "shoplens/core/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "shoplens/core/enum_names.h"
#include "shoplens/core/errors.h"

namespace shoplens {
namespace fs = std::filesystem;

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

RegularFile not_regular(mode_t mode) {
  RegularFile file;
  file.problem = not_regular_reason(mode);
  file.not_regular = true;
  return file;
}

RegularFile unreachable(int error) {
  RegularFile file;
  file.problem = "cannot read file: " + describe_errno(error);
  file.error = error;
  return file;
}

}  // namespace

std::string file_type_name(mode_t mode) { return file_type_name(file_type_of(mode)); }

std::string file_type_name(fs::file_type type) { return name_in(kFileTypeNames, type, "an unknown kind of file"); }

std::string describe_errno(int error) {
  if (error == ELOOP) return std::string("symlink loop (") + std::strerror(error) + ")";
  return std::strerror(error);
}

std::string not_regular_reason(mode_t mode) {
  return S_ISREG(mode) ? std::string() : "not a regular file (" + file_type_name(mode) + ")";
}

RegularFile open_regular_file(const fs::path& path, int extra_flags) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return unreachable(errno);
  if (!S_ISREG(st.st_mode)) return not_regular(st.st_mode);
  RegularFile file;
  file.fd = UniqueFd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | extra_flags));
  if (file.fd.get() < 0) return unreachable(errno);
  if (::fstat(file.fd.get(), &st) != 0) return unreachable(errno);
  if (!S_ISREG(st.st_mode)) return not_regular(st.st_mode);
  // Back to blocking reads: O_NONBLOCK only kept the open itself from waiting.
  if (const int flags = ::fcntl(file.fd.get(), F_GETFL); flags >= 0)
    ::fcntl(file.fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  file.size = static_cast<std::uint64_t>(st.st_size);
  return file;
}

void require_regular_file(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw IoError("cannot open '" + path.string() + "': " + describe_errno(errno));
  if (!S_ISREG(st.st_mode))
    throw DataError("'" + path.string() + "' is " + not_regular_reason(st.st_mode) + ": only regular files are read");
}

std::size_t read_fully(int fd, void* data, std::size_t size) {
  auto* bytes = static_cast<char*>(data);
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, bytes + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw DataError("cannot read file: " + describe_errno(errno));
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  return done;
}

std::string read_to_end(int fd, std::uint64_t size_hint) {
  // One byte past the size seen, so a file that grew meanwhile is noticed and read on.
  std::string out(static_cast<std::size_t>(size_hint) + 1, '\0');
  std::size_t have = read_fully(fd, out.data(), out.size());
  while (have == out.size()) {
    out.resize(std::max<std::size_t>(out.size() * 2, 4096));
    have += read_fully(fd, out.data() + have, out.size() - have);
  }
  out.resize(have);
  return out;
}

}  // namespace shoplens
