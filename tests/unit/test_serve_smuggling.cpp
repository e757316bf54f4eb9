// Request smuggling against the HTTP frontend, in process (tests/serve_test_util.h: a fake model
// and a raw socket client). Each request below hides a second one in bytes that a proxy in front
// would read as the first one's body (or the reverse). The server must answer the first with an
// error and close the connection: the hidden request is never answered.
#include <gtest/gtest.h>

#include <cstdio>

#include <nlohmann/json.hpp>

#include "serve_test_util.h"

namespace shoplens::testing {
namespace {

using json = nlohmann::json;

const std::string kHidden = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";

// fake_png()'s length in hexadecimal, as a chunk size line writes it.
std::string png_size_hex() {
  char text[16];
  std::snprintf(text, sizeof text, "%zx", fake_png().size());
  return text;
}

// Sends `request` on a fresh connection: one answer of `status` whose JSON error names `reason`,
// then the connection closes with no second answer.
void expect_one_answer_then_close(int port, const std::string& request, int status, const std::string& reason) {
  RawConnection c(port);
  ASSERT_TRUE(c.connected());
  c.send(request);
  const RawReply first = c.read_reply(30);
  EXPECT_EQ(first.status, status) << first.head << first.body;
  const json body = json::parse(first.body, nullptr, /*allow_exceptions=*/false);
  EXPECT_NE(body.value("error", "").find(reason), std::string::npos) << first.body;
  EXPECT_NE(first.head.find("Connection: close"), std::string::npos) << first.head;
  const RawReply second = c.read_reply(5);
  EXPECT_EQ(second.status, 0) << "a second answer on the connection: " << second.head << second.body;
  EXPECT_TRUE(c.wait_closed_by_peer(30));
}

void expect_still_serving(int port) {
  RawConnection c(port);
  c.send(kHidden);
  EXPECT_EQ(c.read_reply(30).status, 200);
}

TEST(ServeSmuggling, ContentLengthAndChunkedGet400AndTheHiddenRequestIsNotAnswered) {
  InProcessServer server(small_limits());
  const std::string head = "POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\n";
  expect_one_answer_then_close(server.port(),
                               head + "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + kHidden, 400,
                               "both Transfer-Encoding and Content-Length");
  expect_one_answer_then_close(
      server.port(),
      head +
          "Transfer-Encoding: chunked\r\nContent-Length: 40\r\n\r\n0\r\n\r\nGET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
      400, "both");
  expect_still_serving(server.port());
}

TEST(ServeSmuggling, TwoContentLengthsGet400AtOnce) {
  InProcessServer server(small_limits());
  const std::string body = fake_png() + kHidden;
  expect_one_answer_then_close(
      server.port(),
      "POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(fake_png().size()) +
          "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body,
      400, "Content-Length given more than once");
}

TEST(ServeSmuggling, MalformedContentLengthAndTransferEncodingAreRefused) {
  InProcessServer server(small_limits());
  const std::string post = "POST /v1/classify HTTP/1.1\r\nHost: x\r\n";
  for (const char* length : {"-4", "+4", "4x", "0x4"})
    expect_one_answer_then_close(server.port(), post + "Content-Length: " + length + "\r\n\r\nbody" + kHidden, 400,
                                 "is not a number of bytes");
  expect_one_answer_then_close(server.port(), post + "Transfer-Encoding: identity\r\n\r\n" + kHidden, 400,
                               "must end with chunked");
  expect_one_answer_then_close(server.port(), post + "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n" + kHidden, 501,
                               "not supported");
  expect_still_serving(server.port());
}

// cpp-httplib alone would skip a line ending in a bare LF and keep a space before the colon in a
// name: a Transfer-Encoding a proxy honours would be invisible to it.
TEST(ServeSmuggling, HeaderLinesThatParsersReadDifferentlyGet400) {
  InProcessServer server(small_limits());
  const std::string post = "POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n";
  const std::string chunked = "0\r\n\r\n" + kHidden;
  expect_one_answer_then_close(server.port(), post + "Transfer-Encoding : chunked\r\n\r\n" + chunked, 400,
                               "white space between a field name and its colon");
  expect_one_answer_then_close(server.port(), post + "X-Fold: a\r\n Transfer-Encoding: chunked\r\n\r\n" + chunked, 400,
                               "obsolete line folding");
  expect_one_answer_then_close(server.port(), post + "Transfer-Encoding: chunked\n\r\n" + chunked, 400, "bare LF");
  expect_one_answer_then_close(server.port(), "GET /healthz HTTP/1.1\nHost: x\n\n" + kHidden, 400, "bare LF");
}

// Chunk sizes cpp-httplib's strtoul would read (0x5, +5, " 5"), and chunk data longer than its
// size (the rest would become the next request).
TEST(ServeSmuggling, AChunkedBodyOffTheGrammarGets400) {
  InProcessServer server(small_limits());
  const std::string head =
      "POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string size = png_size_hex();
  for (const std::string& bad_size : {"0x" + size, "+" + size, " " + size})
    expect_one_answer_then_close(server.port(), head + bad_size + "\r\n" + fake_png() + "\r\n0\r\n\r\n" + kHidden, 400,
                                 "malformed chunked body");
  expect_one_answer_then_close(server.port(), head + size + "\r\n" + fake_png() + "XX\r\n0\r\n\r\n" + kHidden, 400,
                               "longer than its size");
  expect_one_answer_then_close(
      server.port(), head + size + "\r\n" + fake_png() + "\r\n0\r\nX-Trailer: 1\r\n\r\n" + kHidden, 400, "trailer");
  expect_still_serving(server.port());
}

// httplib does not read the body of a GET: its bytes would be read as the next request.
TEST(ServeSmuggling, AGetWithABodyIsRefusedUnread) {
  InProcessServer server(small_limits());
  expect_one_answer_then_close(
      server.port(),
      "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(kHidden.size()) + "\r\n\r\n" + kHidden,
      400, "takes no body");
  expect_one_answer_then_close(
      server.port(), "GET /readyz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + kHidden, 400,
      "takes no body");
  RawConnection c(server.port());
  c.send("GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n" + kHidden);  // no body: both answered
  EXPECT_EQ(c.read_reply(30).status, 200);
  EXPECT_EQ(c.read_reply(30).status, 200);
}

TEST(ServeSmuggling, AHeadOverTheLimitGets431) {
  InProcessServer server(small_limits());
  expect_one_answer_then_close(server.port(), endless_headers("GET /healthz HTTP/1.1", 40000) + "\r\n" + kHidden, 431,
                               "larger than 16384 bytes");
  // Its end in the same packet as the limit changes nothing.
  expect_one_answer_then_close(server.port(),
                               "GET /healthz HTTP/1.1\r\nX-Big: " + std::string(17000, 'a') + "\r\n\r\n" + kHidden, 431,
                               "larger than");
}

TEST(ServeSmuggling, SoundPipelinedRequestsAreAllAnswered) {
  InProcessServer server(small_limits());
  const std::string png = fake_png();
  RawConnection c(server.port());
  c.send("POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(png.size()) + "\r\n\r\n" + png +
         "POST /v1/classify HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + png_size_hex() + ";x=y\r\n" +
         png + "\r\n0\r\n\r\n" + kHidden);
  EXPECT_EQ(c.read_reply(30).status, 200);
  EXPECT_EQ(c.read_reply(30).status, 200);
  EXPECT_EQ(c.read_reply(30).status, 200);
}

}  // namespace
}  // namespace shoplens::testing
