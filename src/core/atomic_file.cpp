#include "shoplens/core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "shoplens/core/errors.h"
#include "shoplens/core/regular_file.h"

namespace shoplens {
namespace {

std::filesystem::path temp_path_for(const std::filesystem::path& target) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return target.parent_path() / ("." + target.filename().string() + ".tmp-" + std::to_string(::getpid()) + "-" +
                                 std::to_string(rng() % 1000000));
}

std::string errno_text() { return std::strerror(errno); }

}  // namespace

void fsync_directory(const std::filesystem::path& dir) {
  int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;  // best effort: some file systems do not allow opening folders
  ::fsync(fd);
  ::close(fd);
}

AtomicFileWriter::AtomicFileWriter(std::filesystem::path target) : target_(std::move(target)) {
  temp_ = temp_path_for(target_);
  file_ = std::fopen(temp_.c_str(), "wb");
  if (!file_) throw IoError("cannot create '" + temp_.string() + "': " + errno_text());
}

AtomicFileWriter::~AtomicFileWriter() {
  if (file_) std::fclose(file_);
  if (!committed_) {
    std::error_code ec;
    std::filesystem::remove(temp_, ec);
  }
}

void AtomicFileWriter::write(const void* data, std::size_t size) {
  if (size == 0) return;
  if (std::fwrite(data, 1, size, file_) != size)
    throw IoError("cannot write '" + target_.string() + "': " + errno_text());
  written_ += size;
}

void AtomicFileWriter::commit() {
  if (std::fflush(file_) != 0 || ::fsync(::fileno(file_)) != 0)
    throw IoError("cannot flush '" + target_.string() + "': " + errno_text());
  if (std::fclose(file_) != 0) {
    file_ = nullptr;
    throw IoError("cannot close '" + target_.string() + "': " + errno_text());
  }
  file_ = nullptr;
  if (std::rename(temp_.c_str(), target_.c_str()) != 0)
    throw IoError("cannot rename '" + temp_.string() + "' to '" + target_.string() + "': " + errno_text());
  committed_ = true;
  fsync_directory(target_.parent_path());
}

void write_file_atomic(const std::filesystem::path& target, std::string_view content) {
  AtomicFileWriter writer(target);
  writer.write(content.data(), content.size());
  writer.commit();
}

std::string read_file(const std::filesystem::path& path) {
  const RegularFile file = open_regular_file(path);
  if (file.not_regular) throw DataError("'" + path.string() + "' is " + file.problem + ": only regular files are read");
  if (!file.problem.empty()) throw IoError("cannot open '" + path.string() + "': " + describe_errno(file.error));
  return read_to_end(file.fd.get(), file.size);
}

}  // namespace shoplens
