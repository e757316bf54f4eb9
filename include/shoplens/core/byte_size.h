// A size in bytes as a config value: "24GiB", "512MiB" or "1500000000" in a file, bytes inside.
// Zero means "not set" (a budget of zero bytes is refused where it is read).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace shoplens {

struct ByteSize {
  std::uint64_t bytes = 0;
  bool is_set() const { return bytes != 0; }
  std::int64_t as_int64() const { return static_cast<std::int64_t>(bytes); }
  friend bool operator==(ByteSize a, ByteSize b) { return a.bytes == b.bytes; }
  friend bool operator!=(ByteSize a, ByteSize b) { return a.bytes != b.bytes; }
};

// "" -> 0; otherwise parse_bytes's grammar (UsageError naming `what` when it is not a size).
ByteSize parse_byte_size(std::string_view text, std::string_view what);
// The shortest exact spelling parse_byte_size reads back: "24GiB", "512MiB", "1000" ("" for 0).
std::string byte_size_text(ByteSize size);

}  // namespace shoplens
