// The files that JSON {"path": ...} requests may read: regular files under --image-root, after
// every symbolic link and ".." is resolved the way the kernel resolves them. Everything else is one
// "miss", whatever the reason (missing, outside the root, a folder, unreadable), so that answers
// never tell a prober which files exist outside the root.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace shoplens::serve {

// The real path of `requested` (relative to `root`, or absolute) when it names a regular file whose
// real path lies under `root`'s real path; nullopt for every miss. UsageError for a request that
// names no path at all (empty, or with a NUL byte).
std::optional<std::filesystem::path> resolve_under_root(const std::filesystem::path& root,
                                                        const std::string& requested);

struct RootFile {
  enum class Outcome { kRead, kMiss, kTooLarge };
  Outcome outcome = Outcome::kMiss;
  std::vector<std::uint8_t> bytes;  // kRead
  std::uintmax_t size = 0;          // kRead, kTooLarge
};

// resolve_under_root, then the file's bytes. A file larger than `max_bytes` is not read
// (kTooLarge: it is inside the root, so saying so tells nothing new). The file is opened without
// following a final symbolic link and checked to be regular on the open descriptor, so swapping
// it for a link or a FIFO after the check gets a miss, not its target.
RootFile read_under_root(const std::filesystem::path& root, const std::string& requested, std::size_t max_bytes);

}  // namespace shoplens::serve
