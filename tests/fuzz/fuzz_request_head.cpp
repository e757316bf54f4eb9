// libFuzzer target: the serve frontend's connection parking reads only this much HTTP itself (the
// blank line ending a request's headers, and a body length Content-Length declares), from bytes
// any client sends. The end it finds must be a real blank line, the first one; a length it returns
// must be the digits of the one Content-Length field, in a section with no Transfer-Encoding or
// Expect field.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>

#include "serve/connection_parking.h"

namespace {

bool is_blank_line_end(const std::string& s, std::size_t end) {
  if (end >= 4 && s.compare(end - 4, 4, "\r\n\r\n") == 0) return true;
  return end >= 2 && s.compare(end - 2, 2, "\n\n") == 0;
}

}  // namespace

// The end of the first blank line in `s`, or npos.
std::size_t first_blank_line_end(const std::string& s) {
  for (std::size_t e = 2; e <= s.size(); ++e)
    if (is_blank_line_end(s, e)) return e;
  return std::string::npos;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  if (shoplens::serve::end_of_headers(bytes) != first_blank_line_end(bytes)) __builtin_trap();
  const std::size_t length = shoplens::serve::declared_body_length(bytes);
  if (length == std::string::npos) return 0;
  if (length > 999999999999999ULL) __builtin_trap();  // 15 digits at most: no overflow
  // A non-zero length comes from a Content-Length field, and never beside chunked framing.
  std::string lower(bytes);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (length > 0 && lower.find("content-length") == std::string::npos) __builtin_trap();
  if (lower.find("\ntransfer-encoding:") != std::string::npos) __builtin_trap();
  return 0;
}
