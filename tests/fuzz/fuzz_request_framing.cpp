// libFuzzer target: the framing rules the serve frontend applies to every request before
// cpp-httplib reads it (serve/request_framing.h), the defence against request smuggling. The first
// byte picks where the body is cut in two; the rest is a request: a head up to the first blank
// line, then body bytes.
//
// A head accepted must be one that no careful parser reads another way: CRLF line ends and one
// blank line, at its end; no NUL, no folded line; its body framing exactly what its fields say
// (one all-digit Content-Length, or Transfer-Encoding alone); and the connection parking's body
// length agrees. A chunked body must end where an independent strict decoder (below) says,
// whether its bytes come in one piece or two, and a body the checker refuses is one the decoder
// refuses too.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "serve/connection_parking.h"
#include "serve/request_framing.h"

namespace {

using shoplens::serve::BodyFraming;
using shoplens::serve::ChunkedBodyChecker;
using shoplens::serve::RequestFraming;

void check(bool property) {
  if (!property) __builtin_trap();
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::vector<std::string> crlf_lines(const std::string& head) {
  std::vector<std::string> lines;
  for (std::size_t at = 0; at < head.size();) {
    const std::size_t end = head.find("\r\n", at);
    lines.push_back(head.substr(at, end - at));
    at = end + 2;
  }
  return lines;
}

// The value of every field line called `name` (any case), with the white space around it.
std::vector<std::string> values_of(const std::vector<std::string>& lines, const std::string& name) {
  std::vector<std::string> out;
  for (std::size_t i = 1; i < lines.size(); ++i)
    if (lower(lines[i].substr(0, name.size() + 1)) == name + ":") out.push_back(lines[i].substr(name.size() + 1));
  return out;
}

void check_accepted_head(const std::string& head, const RequestFraming& f) {
  check(head.size() >= 4 && head.compare(head.size() - 4, 4, "\r\n\r\n") == 0);
  check(head.find("\r\n\r\n") == head.size() - 4);  // one blank line, at the end
  for (std::size_t i = 0; i < head.size(); ++i) {
    check(head[i] != '\0');
    if (head[i] == '\n') check(i > 0 && head[i - 1] == '\r');
    if (head[i] == '\r') check(i + 1 < head.size() && head[i + 1] == '\n');
  }
  const std::vector<std::string> lines = crlf_lines(head);
  for (std::size_t i = 1; i + 1 < lines.size(); ++i) check(lines[i][0] != ' ' && lines[i][0] != '\t');
  const auto lengths = values_of(lines, "content-length");
  const auto codings = values_of(lines, "transfer-encoding");
  check(lengths.size() <= 1 && (lengths.empty() || codings.empty()));
  check((f.body == BodyFraming::kChunked) == !codings.empty());
  check((f.body == BodyFraming::kLength) == !lengths.empty());
  if (f.body == BodyFraming::kLength) {
    std::uint64_t value = 0;
    for (const char c : lengths[0]) {
      if (c == ' ' || c == '\t') continue;
      check(c >= '0' && c <= '9');
      const auto digit = static_cast<std::uint64_t>(c - '0');
      value = value > (std::numeric_limits<std::uint64_t>::max() - digit) / 10
                  ? std::numeric_limits<std::uint64_t>::max()
                  : value * 10 + digit;
    }
    check(value == f.length);
  }
}

void check_parking_agrees(const std::string& head, const RequestFraming& f) {
  const std::size_t parked = shoplens::serve::declared_body_length(head);
  if (!f.ok() || f.expects_continue || f.body == BodyFraming::kChunked) return check(parked == std::string::npos);
  if (f.body == BodyFraming::kNone) return check(parked == 0);
  check(f.length > shoplens::serve::kLongestParkedLength ? parked == std::string::npos : parked == f.length);
}

// An independent strict chunked decoder: where a complete, valid body ends (npos: invalid or
// incomplete), and the data bytes it holds.
std::size_t reference_chunked_end(const std::string& s, std::uint64_t& content) {
  content = 0;
  for (std::size_t at = 0;;) {
    const std::size_t eol = s.find("\r\n", at);
    if (eol == std::string::npos) return eol;
    const std::string line = s.substr(at, eol - at);
    if (line.size() + 2 > shoplens::serve::kMaxChunkSizeLine) return std::string::npos;
    std::size_t digits = 0;
    while (digits < line.size() && std::isxdigit(static_cast<unsigned char>(line[digits])) != 0) ++digits;
    if (digits == 0 || digits > 15) return std::string::npos;
    std::string rest = line.substr(digits);
    for (const char c : rest)
      if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f) return std::string::npos;
    const std::size_t semicolon = rest.find_first_not_of(" \t");
    if (!rest.empty() && (semicolon == std::string::npos || rest[semicolon] != ';')) return std::string::npos;
    const std::uint64_t size = std::stoull(line.substr(0, digits), nullptr, 16);
    at = eol + 2;
    if (size == 0) return s.compare(at, 2, "\r\n") == 0 ? at + 2 : std::string::npos;
    if (s.size() - at < size + 2 || s.compare(at + size, 2, "\r\n") != 0) return std::string::npos;
    content += size;
    at += size + 2;
  }
}

void check_chunked_body(const std::string& body, std::size_t cut) {
  ChunkedBodyChecker whole, halves;
  const std::size_t consumed = whole.feed(body.data(), body.size());
  std::size_t in_halves = halves.feed(body.data(), cut);
  if (in_halves == cut && !halves.done()) in_halves += halves.feed(body.data() + cut, body.size() - cut);
  check(in_halves == consumed && halves.done() == whole.done() && halves.failed() == whole.failed());
  check(consumed <= body.size() && (whole.done() || whole.failed() || consumed == body.size()));
  std::uint64_t content = 0;
  const std::size_t end = reference_chunked_end(body, content);
  if (whole.done()) check(end == consumed && content == whole.content_bytes());
  if (end != std::string::npos) check(whole.done());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string request(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::size_t head_end = shoplens::serve::end_of_headers(request);
  const std::string head = head_end == std::string::npos ? request : request.substr(0, head_end);
  const RequestFraming f = shoplens::serve::read_request_framing(head);
  check(f.status == 0 || f.status == 400 || f.status == 431 || f.status == 501);
  check(f.ok() == f.fault.empty());
  if (f.ok()) check_accepted_head(head, f);
  check_parking_agrees(head, f);
  const std::string body = head_end == std::string::npos ? request : request.substr(head_end);
  check_chunked_body(body, body.empty() ? 0 : data[0] % (body.size() + 1));
  return 0;
}
