// The framing rules the serve frontend applies to a request's head and chunked body before
// cpp-httplib reads them (serve/request_framing.h): every head two parsers could read two ways is
// refused, with the status RFC 9112 gives it.
#include <gtest/gtest.h>

#include <limits>

#include "serve/connection_parking.h"
#include "serve/request_framing.h"

namespace shoplens::serve {
namespace {

const std::string kPost = "POST /v1/classify HTTP/1.1\r\nHost: x\r\n";

RequestFraming framing_of(const std::string& fields) { return read_request_framing(kPost + fields + "\r\n"); }

void expect_refused(const std::string& fields, int status, const std::string& reason_part) {
  const RequestFraming f = framing_of(fields);
  EXPECT_EQ(f.status, status) << fields;
  EXPECT_NE(f.fault.find(reason_part), std::string::npos) << fields << ": " << f.fault;
}

TEST(RequestFraming, ASoundHeadSaysHowItsBodyEnds) {
  RequestFraming f = framing_of("Content-Length: 42\r\n");
  EXPECT_TRUE(f.ok());
  EXPECT_EQ(f.body, BodyFraming::kLength);
  EXPECT_EQ(f.length, 42u);
  f = framing_of("Transfer-Encoding: Chunked \r\n");
  EXPECT_TRUE(f.ok());
  EXPECT_EQ(f.body, BodyFraming::kChunked);
  f = framing_of("content-length:\t0\r\nExpect: 100-continue\r\n");
  EXPECT_TRUE(f.ok());
  EXPECT_EQ(f.body, BodyFraming::kLength);
  EXPECT_TRUE(f.expects_continue);
  EXPECT_EQ(read_request_framing("GET /healthz HTTP/1.1\r\n\r\n").body, BodyFraming::kNone);
}

TEST(RequestFraming, TransferEncodingBesideContentLengthIsRefused) {
  expect_refused("Content-Length: 4\r\nTransfer-Encoding: chunked\r\n", 400,
                 "both Transfer-Encoding and Content-Length");
  expect_refused("Transfer-Encoding: chunked\r\nContent-Length: 4\r\n", 400, "both");
  expect_refused("Transfer-Encoding: chunked\r\nContent-Length: 0\r\n", 400, "both");
}

TEST(RequestFraming, ContentLengthIsDigitsGivenOnce) {
  expect_refused("Content-Length: 4\r\nContent-Length: 5\r\n", 400, "more than once");
  expect_refused("Content-Length: 4\r\nContent-Length: 4\r\n", 400, "more than once");
  for (const char* bad : {"-4", "+4", "4a", "0x4", "", "4 4", "1e3", "4,4", "\xd9\xa4"})
    expect_refused(std::string("Content-Length: ") + bad + "\r\n", 400, "is not a number of bytes");
  // Past 64 bits: larger than any body limit (413 later), never a wrapped small number.
  const RequestFraming huge = framing_of("Content-Length: 99999999999999999999999\r\n");
  EXPECT_TRUE(huge.ok());
  EXPECT_EQ(huge.length, std::numeric_limits<std::uint64_t>::max());
}

TEST(RequestFraming, OnlyChunkedIsATransferCoding) {
  expect_refused("Transfer-Encoding: gzip\r\n", 400, "must end with chunked");
  expect_refused("Transfer-Encoding: chunked, gzip\r\n", 400, "must end with chunked");
  expect_refused("Transfer-Encoding: identity\r\n", 400, "must end with chunked");
  expect_refused("Transfer-Encoding: chunked;q=1\r\n", 400, "must end with chunked");
  expect_refused("Transfer-Encoding: \r\n", 400, "must end with chunked");
  expect_refused("Transfer-Encoding: chunked, chunked\r\n", 400, "more than once");
  expect_refused("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", 400, "more than once");
  expect_refused("Transfer-Encoding: gzip, chunked\r\n", 501, "'gzip' is not supported");
  const RequestFraming old = read_request_framing("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n");
  EXPECT_EQ(old.status, 400);
  EXPECT_NE(old.fault.find("HTTP/1.0"), std::string::npos) << old.fault;
}

TEST(RequestFraming, HeaderLinesAParserCouldReadTwoWaysAreRefused) {
  expect_refused("Transfer-Encoding : chunked\r\n", 400, "white space between a field name and its colon");
  expect_refused("Content-Length\t: 4\r\n", 400, "white space between");
  expect_refused("X-Long: a\r\n Transfer-Encoding: chunked\r\n", 400, "obsolete line folding");
  expect_refused("X-Long: a\r\n\tchunked\r\n", 400, "obsolete line folding");
  expect_refused("Transfer-Encoding\r\n", 400, "no colon");
  expect_refused(": chunked\r\n", 400, "no field name");
  expect_refused("Content(Length): 4\r\n", 400, "a character a name may not");
  expect_refused(std::string("X-A: a\0b\r\n", 10), 400, "control character");
  expect_refused("X-A: a\x7f\r\n", 400, "control character");
  EXPECT_TRUE(framing_of("X-A: caf\xc3\xa9 \t\r\n").ok());  // obs-text and trailing white space
}

TEST(RequestFraming, LinesEndWithCrlf) {
  EXPECT_EQ(read_request_framing("POST / HTTP/1.1\nContent-Length: 4\n\n").status, 400);
  EXPECT_EQ(read_request_framing("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\n\r\n").status, 400);
  EXPECT_EQ(read_request_framing("POST / HTTP/1.1\r\nX: a\rTransfer-Encoding: chunked\r\n\r\n").status, 400);
  EXPECT_EQ(read_request_framing("POST / HTTP/1.1\r\n\r\n\r\n").status, 400);     // bytes past the blank line
  EXPECT_EQ(read_request_framing("\r\n\r\n").status, 400);                        // no request line
  EXPECT_EQ(read_request_framing("POST / HTTP/1.1\r\nHost: x\r\n").status, 400);  // no blank line
}

TEST(RequestFraming, AHeadOverTheLimitGets431) {
  const std::string big = kPost + "X-Big: " + std::string(kMaxRequestHeadBytes, 'a') + "\r\n\r\n";
  EXPECT_EQ(read_request_framing(big).status, 431);
}

TEST(RequestFraming, TheParkingWaitsOnlyForBodiesASoundHeadDeclares) {
  EXPECT_EQ(declared_body_length(kPost + "Content-Length: 9\r\n\r\n"), 9u);
  EXPECT_EQ(declared_body_length(kPost + "Content-Length: 9\r\nTransfer-Encoding: chunked\r\n\r\n"), std::string::npos);
  EXPECT_EQ(declared_body_length(kPost + "Content-Length : 9\r\n\r\n"), std::string::npos);
  EXPECT_EQ(declared_body_length(kPost + "Content-Length: 9\r\nX: a\n\r\n"), std::string::npos);
}

// Feeds `body` to a checker in one piece and byte by byte: both must agree.
struct Checked {
  bool done = false, failed = false;
  std::size_t consumed = 0;
  std::uint64_t content = 0;
  std::string fault;
};
Checked check_chunked(const std::string& body) {
  ChunkedBodyChecker whole, bytewise;
  Checked out;
  out.consumed = whole.feed(body.data(), body.size());
  std::size_t consumed = 0;
  for (std::size_t i = 0; i < body.size() && !bytewise.done() && !bytewise.failed(); ++i)
    consumed += bytewise.feed(body.data() + i, 1);
  EXPECT_EQ(consumed, out.consumed) << body;
  EXPECT_EQ(whole.done(), bytewise.done()) << body;
  out.done = whole.done();
  out.failed = whole.failed();
  out.content = whole.content_bytes();
  out.fault = whole.fault();
  return out;
}

TEST(RequestFraming, AChunkedBodyEndsWhereItsGrammarSays) {
  const std::string body = "5\r\nhello\r\nA;name=value; x\r\n0123456789\r\n0\r\n\r\n";
  const Checked c = check_chunked(body + "GET /healthz HTTP/1.1\r\n\r\n");
  EXPECT_TRUE(c.done);
  EXPECT_EQ(c.consumed, body.size());  // not a byte of the next request
  EXPECT_EQ(c.content, 15u);
  EXPECT_TRUE(check_chunked("5 ;ext\r\nhello\r\n0\r\n\r\n").done);  // white space before ';' (BWS)
}

TEST(RequestFraming, AChunkedBodyThatBreaksTheGrammarFailsAtTheBadByte) {
  for (const char* bad :
       {"0x5\r\nhello\r\n0\r\n\r\n", " 5\r\nhello\r\n0\r\n\r\n", "+5\r\nhello\r\n0\r\n\r\n", "-1\r\n",
        "5 \r\nhello\r\n0\r\n\r\n", "5\nhello\r\n0\r\n\r\n", "5\r\nhelloGET / HTTP/1.1\r\n", "5\r\nhello\n0\r\n\r\n",
        "0\r\nTrailer: x\r\n\r\n", "0\r\n\n", "\r\n", "1000000000000000\r\n", "5;a\nb\r\nhello\r\n0\r\n\r\n"}) {
    const Checked c = check_chunked(bad);
    EXPECT_TRUE(c.failed) << bad;
    EXPECT_FALSE(c.fault.empty()) << bad;
    EXPECT_LT(c.consumed, std::string(bad).size()) << bad;
  }
  EXPECT_NE(check_chunked("5\r\nhelloX").fault.find("longer than its size"), std::string::npos);
  EXPECT_NE(check_chunked("0\r\nX: y\r\n\r\n").fault.find("trailer"), std::string::npos);
}

// Extensions are not body bytes (no body limit counts them) and httplib holds a size line whole:
// a gigabyte of extension would be a gigabyte of memory.
TEST(RequestFraming, AChunkSizeLineIsAtMost4096Bytes) {
  const std::string fits = "5;" + std::string(kMaxChunkSizeLine - 4, 'x') + "\r\n";
  EXPECT_EQ(fits.size(), kMaxChunkSizeLine);
  EXPECT_TRUE(check_chunked(fits + "hello\r\n0\r\n\r\n").done);
  const Checked c = check_chunked("5;" + std::string(kMaxChunkSizeLine, 'x') + "\r\nhello\r\n0\r\n\r\n");
  EXPECT_TRUE(c.failed);
  EXPECT_NE(c.fault.find("longer than 4096 bytes"), std::string::npos) << c.fault;
  EXPECT_EQ(c.consumed, kMaxChunkSizeLine);
}

TEST(RequestFraming, AChunkedBodyCutShortIsNeitherDoneNorFailed) {
  const Checked c = check_chunked("5\r\nhel");
  EXPECT_FALSE(c.done);
  EXPECT_FALSE(c.failed);
  EXPECT_EQ(c.consumed, 6u);
}

}  // namespace
}  // namespace shoplens::serve
