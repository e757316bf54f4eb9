// The fuzz input as a reader's ReadAt: the bytes libFuzzer gave, read only inside them. A read
// outside traps, because every reader must check an offset against the size before it reads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace shoplens::fuzz {

inline auto buffer_reader(const std::string& bytes) {
  return [&bytes](std::uint64_t offset, std::size_t length) {
    if (offset > bytes.size() || length > bytes.size() - offset) __builtin_trap();
    return bytes.substr(static_cast<std::size_t>(offset), length);
  };
}

}  // namespace shoplens::fuzz
