// The central directory of a zip archive (the container of torch.save files), read before any
// entry is extracted: an entry's declared uncompressed size is what the extractor allocates, so a
// 10 KB archive declaring gigabytes is refused here instead of exhausting memory. Torch-free, so
// the fuzz target links it alone. Not part of the public interface.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace shoplens::detail {

struct ZipEntry {
  std::string name;
  std::uint16_t method = 0;  // 0 stored (what torch.save writes), 8 deflate
  std::uint64_t compressed_size = 0;
  std::uint64_t uncompressed_size = 0;
};

// Reads `size` bytes at `offset` of the archive (a file, or a buffer in tests and the fuzzer).
using ReadAt = std::function<std::string(std::uint64_t offset, std::size_t size)>;

// Parses the end-of-central-directory record (zip64 too) and every central directory entry of an
// archive of `file_size` bytes. Throws DataError prefixed with `source` on anything malformed.
std::vector<ZipEntry> read_zip_directory(std::uint64_t file_size, const ReadAt& read_at, const std::string& source);

// Throws DataError unless every entry is stored or deflated and the declared uncompressed sizes
// add up to at most `max_ratio` times the file size (plus 1 MiB for tiny files).
void check_zip_sizes(const std::vector<ZipEntry>& entries, std::uint64_t file_size, const std::string& source,
                     std::uint64_t max_ratio = 16);

}  // namespace shoplens::detail
