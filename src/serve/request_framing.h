// Where a request's body ends, by RFC 9112's rules, checked before cpp-httplib reads the request.
//
// Request smuggling is two parsers disagreeing about where a request ends: a proxy in front that
// takes Content-Length, a server that takes Transfer-Encoding, and the bytes between are a second
// request only the server sees. cpp-httplib 0.11 reads whatever it is given leniently (it uses the
// chunked coding when both are present, the first of two Content-Lengths, skips a header line
// that ends in a bare LF, keeps a space before the colon in the name, and parses chunk sizes with
// strtoul: "0x5", " 5" and "+5" are 5). So the frontend refuses, before httplib sees them, every
// head that two careful parsers could read in two ways, and checks a chunked body byte by byte as
// httplib reads it; a refused request gets its answer and the connection closes, so no byte after
// it is read as a request.
//
// Plain C++ on bytes (no sockets, no httplib): the connection parking, the worker's stream and the
// fuzz target (tests/fuzz/fuzz_request_framing.cpp) all use these.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace shoplens::serve {

// The largest request head (request line, header lines, blank line) the server reads: a longer one
// gets 431 and the connection closes. The connection parking hands over a head at this size.
constexpr std::size_t kMaxRequestHeadBytes = 16384;

enum class BodyFraming { kNone, kLength, kChunked };

struct RequestFraming {
  int status = 0;     // 0: the head's framing is sound; else the answer (400, 431 or 501), then close
  std::string fault;  // why, for that answer
  BodyFraming body = BodyFraming::kNone;
  // kLength: the declared length; a value past UINT64_MAX reads as UINT64_MAX (over any body limit).
  std::uint64_t length = 0;
  bool expects_continue = false;  // Expect: 100-continue
  bool ok() const { return status == 0; }
};

// `head`: the bytes from the request line through the blank line that ends the headers. Refused:
// a line that does not end in CRLF (a bare LF or CR), a NUL or other control character, a line
// folded onto the previous one (obs-fold), a field name that is not a token or has white space
// before its colon, a Content-Length that is not all digits or is given twice, a Transfer-Encoding
// beside a Content-Length or in an HTTP/1.0 request, a transfer coding list that does not end in
// chunked or applies it twice (400); codings other than chunked (501); a head over
// kMaxRequestHeadBytes (431).
RequestFraming read_request_framing(std::string_view head);

// A chunked body checked as its bytes arrive, with the grammar of RFC 9112 section 7.1 and no
// leniency: hexadecimal sizes of at most 15 digits, extensions after ';' (visible characters,
// spaces and tabs) on a size line of at most kMaxChunkSizeLine bytes, CRLF included (httplib holds
// the line whole,
// and extensions are not counted as body: a gigabyte of them was a gigabyte of memory), CRLF after
// every size line and every chunk's data, the last chunk (size 0) followed by CRLF (no trailer
// fields: httplib refuses them too).
constexpr std::size_t kMaxChunkSizeLine = 4096;
class ChunkedBodyChecker {
 public:
  // Takes the next bytes of the body; returns how many belong to it: all of them, or fewer when
  // the body ended (done()) or broke the grammar (failed(): the rest, from the bad byte, is not
  // consumed).
  std::size_t feed(const char* data, std::size_t size);
  bool done() const { return state_ == State::kDone; }
  bool failed() const { return state_ == State::kFailed; }
  const std::string& fault() const { return fault_; }
  std::uint64_t content_bytes() const { return content_; }  // the data of the chunks so far

 private:
  enum class State {
    kSize,
    kSizeSpace,
    kExtension,
    kSizeLf,
    kData,
    kDataCr,
    kDataLf,
    kLastCr,
    kLastLf,
    kDone,
    kFailed
  };
  bool step(char c);  // false: the byte breaks the grammar
  bool after_size(char c);
  bool in_size_line() const {
    return state_ == State::kSize || state_ == State::kSizeSpace || state_ == State::kExtension ||
           state_ == State::kSizeLf;
  }
  bool enter(State next) {
    state_ = next;
    return true;
  }
  bool fail(const char* why);
  State state_ = State::kSize;
  int size_digits_ = 0;
  std::size_t line_bytes_ = 0;  // of the current size line
  std::uint64_t chunk_ = 0;     // the current chunk's size, then what is left of its data
  std::uint64_t content_ = 0;
  std::string fault_;
};

}  // namespace shoplens::serve
