#include "shoplens/serve/image_root.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>

#include "shoplens/core/errors.h"
#include "shoplens/core/unique_fd.h"

namespace shoplens::serve {
namespace fs = std::filesystem;

namespace {

// realpath(3): resolves links and ".." component by component, as open() would. (weakly_canonical
// shortens "missing/../link/x" to "link/x" lexically when "missing" does not exist, and open()
// then follows "link" wherever it points.)
std::optional<fs::path> real_path(const fs::path& p) {
  char buf[PATH_MAX];
  if (::realpath(p.c_str(), buf) == nullptr) return std::nullopt;
  return fs::path(buf);
}

bool is_within(const fs::path& base, const fs::path& p) {
  auto b = base.begin(), q = p.begin();
  for (; b != base.end() && !b->empty(); ++b, ++q)
    if (q == p.end() || *q != *b) return false;
  return true;
}

bool read_all(int fd, std::vector<std::uint8_t>& out) {
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;  // an error, or the file shrank meanwhile
    done += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

std::optional<fs::path> resolve_under_root(const fs::path& root, const std::string& requested) {
  if (requested.empty()) throw UsageError("\"path\" is empty");
  if (requested.find('\0') != std::string::npos) throw UsageError("\"path\" contains a NUL byte");
  const auto base = real_path(root);
  if (!base) return std::nullopt;
  const fs::path p(requested);
  auto resolved = real_path(p.is_absolute() ? p : *base / p);
  if (!resolved || !is_within(*base, *resolved)) return std::nullopt;
  std::error_code ec;
  if (!fs::is_regular_file(*resolved, ec)) return std::nullopt;
  return resolved;
}

RootFile read_under_root(const fs::path& root, const std::string& requested, std::size_t max_bytes) {
  RootFile file;
  const auto resolved = resolve_under_root(root, requested);
  if (!resolved) return file;
  // O_NONBLOCK: a FIFO swapped in after the check must not block the open.
  const UniqueFd fd(::open(resolved->c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  struct stat st {};
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return file;
  file.size = static_cast<std::uintmax_t>(st.st_size);
  if (file.size > max_bytes) {
    file.outcome = RootFile::Outcome::kTooLarge;
    return file;
  }
  file.bytes.resize(static_cast<std::size_t>(file.size));
  if (!read_all(fd.get(), file.bytes)) return RootFile{};
  file.outcome = RootFile::Outcome::kRead;
  return file;
}

}  // namespace shoplens::serve
