#include "shoplens/data/shard_core.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "shoplens/core/errors.h"

namespace shoplens {

namespace fs = std::filesystem;

fs::path shard_index_path(const fs::path& dir, const std::string& name, const ShardFormat& format) {
  return dir / (name + format.index_ext);
}

fs::path shard_payload_path(const fs::path& dir, const std::string& name, const ShardFormat& format) {
  return dir / (name + format.payload_ext);
}

MappedFile::MappedFile(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IoError("cannot open '" + path.string() + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw IoError("cannot stat '" + path.string() + "': " + std::strerror(errno));
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      throw IoError("cannot map '" + path.string() + "': " + std::strerror(errno));
    }
    // Samples are read in shuffled order; do not let the kernel read far ahead.
    ::madvise(p, size_, MADV_RANDOM);
    data_ = static_cast<const std::uint8_t*>(p);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<std::uint8_t*>(data_), size_);
}

ShardFileWriter::ShardFileWriter(const fs::path& dir, std::string name, Split split, const ShardFormat& format)
    : dir_(dir), format_(format), payload_(shard_payload_path(dir, name, format)) {
  listing_.name = std::move(name);
  listing_.split = split;
}

void ShardFileWriter::append(const void* bytes, std::size_t size, std::uint64_t units) {
  payload_.write(bytes, size);
  listing_.payload_crc32 = crc32_of(bytes, size, listing_.payload_crc32);
  listing_.payload_size += units;
  listing_.count++;
}

void ShardFileWriter::stamp(ShardIndexPrefix& prefix, std::size_t entry_size, std::size_t count,
                            std::uint32_t entries_crc32) const {
  std::memcpy(prefix.magic, format_.magic, sizeof prefix.magic);
  prefix.version = format_.version;
  prefix.entry_size = static_cast<std::uint32_t>(entry_size);
  prefix.count = count;
  prefix.payload_size = listing_.payload_size;
  prefix.payload_crc32 = listing_.payload_crc32;
  prefix.entries_crc32 = entries_crc32;
}

ShardListing ShardFileWriter::commit(const void* header, std::size_t header_size, const void* entries,
                                     std::size_t entries_size) {
  payload_.commit();
  std::string bytes(static_cast<const char*>(header), header_size);
  if (entries_size) bytes.append(static_cast<const char*>(entries), entries_size);
  write_file_atomic(shard_index_path(dir_, listing_.name, format_), bytes);
  listing_.index_crc32 = crc32_of(bytes.data(), bytes.size());
  return listing_;
}

std::unique_ptr<MappedFile> map_shard_index(const fs::path& dir, const std::string& name, const ShardFormat& format,
                                            std::uint32_t listed_crc32) {
  const fs::path index = shard_index_path(dir, name, format);
  if (!fs::exists(index))
    throw DataError(index.string() + ": index missing (the shard was never completed: a torn write; regenerate it)");
  auto file = std::make_unique<MappedFile>(index);
  if (listed_crc32 != 0 && crc32_of(file->data(), file->size()) != listed_crc32)
    throw DataError(index.string() + ": checksum does not match " + format.dataset_file +
                    " (corrupted or replaced index)");
  return file;
}

std::unique_ptr<MappedFile> map_shard_payload(const fs::path& dir, const std::string& name, const ShardFormat& format,
                                              std::uint64_t bytes, std::uint32_t crc32, bool verify) {
  const fs::path payload = shard_payload_path(dir, name, format);
  if (!fs::exists(payload))
    throw DataError(payload.string() + ": " + format.payload_file + " missing (its index exists)");
  auto file = std::make_unique<MappedFile>(payload);
  if (file->size() != bytes)
    throw DataError(payload.string() + ": size " + std::to_string(file->size()) + " does not match its index (" +
                    std::to_string(bytes) + " bytes)");
  if (verify && crc32_of(file->data(), file->size()) != crc32)
    throw DataError(payload.string() + ": checksum mismatch (corrupted " + format.payload_file + ")");
  return file;
}

void check_listed_prefix(const ShardIndexPrefix& prefix, std::size_t records, const ShardListing& listing,
                         const ShardFormat& format, const fs::path& dir) {
  const std::string index = shard_index_path(dir, listing.name, format).string();
  const auto differs = [&](const std::string& what, std::uint64_t held, std::uint64_t listed) {
    return DataError(index + ": holds " + std::to_string(held) + " " + what + " but " + format.dataset_file + " says " +
                     std::to_string(listed));
  };
  if (records != listing.count) throw differs("records", records, listing.count);
  if (prefix.payload_size != listing.payload_size)
    throw differs(format.payload_unit, prefix.payload_size, listing.payload_size);
  if (prefix.payload_crc32 != listing.payload_crc32)
    throw DataError(index + ": " + format.payload_file + " checksum differs from " + format.dataset_file);
}

void throw_wrong_split(const fs::path& index, std::size_t entry, Split split) {
  throw DataError(index.string() + ": entry " + std::to_string(entry) + " is in another split than its shard (" +
                  split_name(split) + ")");
}

std::vector<std::string> unlisted_shard_files(const fs::path& dir, const std::vector<ShardListing>& listings,
                                              const ShardFormat& format) {
  std::set<std::string> listed;
  for (const auto& shard : listings) {
    listed.insert(shard.name + format.payload_ext);
    listed.insert(shard.name + format.index_ext);
  }
  std::vector<std::string> unlisted;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string file = entry.path().filename().string();
    const std::string ext = entry.path().extension().string();
    if ((ext == format.payload_ext || ext == format.index_ext) && !listed.count(file)) unlisted.push_back(file);
  }
  std::sort(unlisted.begin(), unlisted.end());
  return unlisted;
}

}  // namespace shoplens
