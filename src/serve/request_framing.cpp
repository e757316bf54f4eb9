#include "serve/request_framing.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <vector>

namespace shoplens::serve {
namespace {

bool is_ows(char c) { return c == ' ' || c == '\t'; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Control characters: never in a request line or a field value (HTAB aside, which OWS allows).
bool is_control(char c) {
  const auto u = static_cast<unsigned char>(c);
  return (u < 0x20 && c != '\t') || u == 0x7f;
}

// RFC 9110 tchar: the characters of a field name.
bool is_tchar(char c) {
  if (std::isalnum(static_cast<unsigned char>(c)) != 0) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool equals_lower(std::string_view s, std::string_view lower) {
  if (s.size() != lower.size()) return false;
  for (std::size_t i = 0; i < s.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[i])) != lower[i]) return false;
  return true;
}

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && is_ows(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ows(s.back())) s.remove_suffix(1);
  return s;
}

std::string lowered(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// What the header lines say about the body, gathered before the rules are applied to it all.
struct FieldsSeen {
  int content_lengths = 0;
  std::uint64_t length = 0;
  bool length_valid = true;
  std::string length_text;
  bool transfer_encoding = false;
  std::vector<std::string> codings;  // every Transfer-Encoding line's list, in order, lower case
  bool expects_continue = false;
};

// 1*DIGIT, saturating at UINT64_MAX (a length that large is over any body limit, 413 later).
bool parse_length(std::string_view text, std::uint64_t& length) {
  if (text.empty()) return false;
  constexpr auto kMax = std::numeric_limits<std::uint64_t>::max();
  length = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return false;
    const auto digit = static_cast<std::uint64_t>(c - '0');
    length = length > (kMax - digit) / 10 ? kMax : length * 10 + digit;
  }
  return true;
}

void add_codings(std::string_view value, FieldsSeen& seen) {
  seen.transfer_encoding = true;
  std::size_t at = 0;
  while (at <= value.size()) {
    const std::size_t comma = std::min(value.find(',', at), value.size());
    const std::string_view coding = trim_ows(value.substr(at, comma - at));
    if (!coding.empty()) seen.codings.push_back(lowered(coding));  // a list may hold empty elements
    at = comma + 1;
  }
}

void note_field(std::string_view name, std::string_view value, FieldsSeen& seen) {
  if (equals_lower(name, "content-length")) {
    ++seen.content_lengths;
    seen.length_text = std::string(value);
    seen.length_valid = parse_length(value, seen.length);
  } else if (equals_lower(name, "transfer-encoding")) {
    add_codings(value, seen);
  } else if (equals_lower(name, "expect")) {
    seen.expects_continue = equals_lower(value, "100-continue");
  }
}

// One header line (no CRLF): empty when sound, else why it is refused.
std::string check_field_line(std::string_view line, FieldsSeen& seen) {
  if (is_ows(line.front())) return "a header line starts with white space (obsolete line folding)";
  const std::size_t colon = line.find(':');
  if (colon == std::string_view::npos) return "a header line has no colon";
  const std::string_view name = line.substr(0, colon);
  if (name.empty()) return "a header line has no field name";
  if (is_ows(name.back())) return "white space between a field name and its colon";
  if (!std::all_of(name.begin(), name.end(), is_tchar)) return "a field name holds a character a name may not";
  const std::string_view value = trim_ows(line.substr(colon + 1));
  if (std::any_of(value.begin(), value.end(), is_control)) return "a control character in a field value";
  note_field(name, value, seen);
  return {};
}

RequestFraming refused(int status, std::string why) {
  RequestFraming f;
  f.status = status;
  f.fault = std::move(why);
  return f;
}

// The body rules over the fields a head declared (RFC 9112 section 6).
RequestFraming frame_body(const FieldsSeen& seen, bool http10) {
  if (seen.transfer_encoding && seen.content_lengths > 0)
    return refused(400, "both Transfer-Encoding and Content-Length: the body's end is ambiguous");
  if (seen.content_lengths > 1) return refused(400, "Content-Length given more than once");
  if (!seen.length_valid) return refused(400, "Content-Length '" + seen.length_text + "' is not a number of bytes");
  RequestFraming f;
  f.expects_continue = seen.expects_continue;
  if (seen.content_lengths == 1) {
    f.body = BodyFraming::kLength;
    f.length = seen.length;
  }
  if (!seen.transfer_encoding) return f;
  if (http10) return refused(400, "Transfer-Encoding in an HTTP/1.0 request");
  if (seen.codings.empty() || seen.codings.back() != "chunked")
    return refused(400, "Transfer-Encoding must end with chunked (the body's end is otherwise unknown)");
  if (std::count(seen.codings.begin(), seen.codings.end(), "chunked") > 1)
    return refused(400, "Transfer-Encoding applies chunked more than once");
  if (seen.codings.size() > 1)
    return refused(501, "transfer coding '" + seen.codings.front() + "' is not supported (only chunked)");
  f.body = BodyFraming::kChunked;
  return f;
}

}  // namespace

RequestFraming read_request_framing(std::string_view head) {
  if (head.size() > kMaxRequestHeadBytes)
    return refused(431, "the request head is larger than " + std::to_string(kMaxRequestHeadBytes) + " bytes");
  FieldsSeen seen;
  bool http10 = false;
  for (std::size_t at = 0, lines = 0; at < head.size(); ++lines) {
    const std::size_t lf = head.find('\n', at);
    if (lf == std::string_view::npos) break;
    if (lf == at || head[lf - 1] != '\r') return refused(400, "a line of the request head ends in a bare LF, not CRLF");
    const std::string_view line = head.substr(at, lf - 1 - at);
    at = lf + 1;
    if (line.find('\r') != std::string_view::npos) return refused(400, "a bare CR in the request head");
    if (lines == 0) {
      if (line.empty() || std::any_of(line.begin(), line.end(), is_control))
        return refused(400, "the request line is empty or holds a control character");
      http10 = line.size() >= 9 && line.substr(line.size() - 9) == " HTTP/1.0";
      continue;
    }
    if (line.empty()) return at == head.size() ? frame_body(seen, http10) : refused(400, "bytes after the blank line");
    const std::string why = check_field_line(line, seen);
    if (!why.empty()) return refused(400, why);
  }
  return refused(400, "the request head does not end with a blank line");
}

bool ChunkedBodyChecker::fail(const char* why) {
  state_ = State::kFailed;
  fault_ = why;
  return false;
}

std::size_t ChunkedBodyChecker::feed(const char* data, std::size_t size) {
  std::size_t at = 0;
  while (at < size && state_ != State::kDone && state_ != State::kFailed) {
    if (state_ == State::kData) {  // the chunk's data, in bulk
      const auto take = static_cast<std::size_t>(std::min<std::uint64_t>(chunk_, size - at));
      chunk_ -= take;
      content_ += take;
      at += take;
      if (chunk_ == 0) state_ = State::kDataCr;
      continue;
    }
    if (in_size_line() && ++line_bytes_ > kMaxChunkSizeLine) {
      fail("a chunk size line (extensions and CRLF included) longer than 4096 bytes");
      return at;
    }
    if (!step(data[at])) return at;
    ++at;
  }
  return at;
}

bool ChunkedBodyChecker::step(char c) {
  switch (state_) {
    case State::kSize:
      if (hex_value(c) >= 0) {
        if (++size_digits_ > 15) return fail("a chunk size of more than 15 hexadecimal digits");
        chunk_ = chunk_ * 16 + static_cast<std::uint64_t>(hex_value(c));
        return true;
      }
      if (size_digits_ == 0) return fail("a chunk size line that does not start with hexadecimal digits");
      return after_size(c);
    case State::kSizeSpace:  // white space may only come before an extension's ';'
      return after_size(c);
    case State::kExtension:  // visible characters and white space, up to the CR
      if (c == '\r') return enter(State::kSizeLf);
      return !is_control(c) || fail("a control character or bare LF in a chunk extension");
    case State::kSizeLf:
      if (c != '\n') return fail("a chunk size line that does not end in CRLF");
      return enter(chunk_ == 0 ? State::kLastCr : State::kData);
    case State::kDataCr:
      return c == '\r' ? enter(State::kDataLf) : fail("chunk data longer than its size (no CRLF after it)");
    case State::kDataLf:
      if (c != '\n') return fail("chunk data not followed by CRLF");
      size_digits_ = 0;
      line_bytes_ = 0;
      return enter(State::kSize);
    case State::kLastCr:
      return c == '\r' ? enter(State::kLastLf) : fail("trailer fields after the last chunk are not accepted");
    case State::kLastLf:
      return c == '\n' ? enter(State::kDone) : fail("the last chunk not followed by CRLF");
    default:
      return false;
  }
}

// A byte after a chunk size's digits (or the white space after them).
bool ChunkedBodyChecker::after_size(char c) {
  if (c == ';') return enter(State::kExtension);
  if (is_ows(c)) return enter(State::kSizeSpace);
  if (c == '\r' && state_ == State::kSize) return enter(State::kSizeLf);
  return fail("a chunk size that is not hexadecimal digits");
}

}  // namespace shoplens::serve
