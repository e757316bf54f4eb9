// Torn-write-safe files: write to a temporary beside the target, fsync, rename, fsync the folder.
// A reader therefore sees either the old file or the whole new one, never a prefix.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>

namespace shoplens {

void write_file_atomic(const std::filesystem::path& target, std::string_view content);
std::string read_file(const std::filesystem::path& path);

// Streams a large file; `commit()` makes it visible atomically, destruction without commit
// removes the temporary (an interrupted writer leaves nothing that looks complete).
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::filesystem::path target);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(const void* data, std::size_t size);
  std::uint64_t bytes_written() const { return written_; }
  void commit();

 private:
  std::filesystem::path target_;
  std::filesystem::path temp_;
  std::FILE* file_ = nullptr;
  std::uint64_t written_ = 0;
  bool committed_ = false;
};

void fsync_directory(const std::filesystem::path& dir);

}  // namespace shoplens
