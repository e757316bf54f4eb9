// The HTTP frontend against hostile clients, in process (tests/serve_test_util.h: a fake model
// and a raw socket client): bytes that are not UTF-8 in anything the answer echoes, probes of
// files outside --image-root, chunked and deeply nested bodies. Every answer must be JSON that
// parses, and the server must keep serving after each.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>

#include <nlohmann/json.hpp>

#include "serve_test_util.h"
#include "test_util.h"

namespace shoplens::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string post(const std::string& body, const std::string& type = "application/json") {
  return "POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Type: " + type +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

std::string chunked_post(const std::string& body, std::size_t chunk) {
  std::string out =
      "POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\nTransfer-Encoding: chunked\r\n\r\n";
  char size[32];
  for (std::size_t at = 0; at < body.size(); at += chunk) {
    const std::string part = body.substr(at, chunk);
    std::snprintf(size, sizeof size, "%zx\r\n", part.size());
    out += size + part + "\r\n";
  }
  return out + "0\r\n\r\n";
}

// Sends `request` on a fresh connection; the reply must be a JSON object with "error" and "status".
json error_reply(int port, const std::string& request, int expected_status) {
  RawConnection c(port);
  EXPECT_TRUE(c.connected());
  c.send(request);
  const RawReply r = c.read_reply(60);
  EXPECT_EQ(r.status, expected_status) << r.head << r.body;
  const json body = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  EXPECT_TRUE(body.is_object() && body.contains("error")) << r.body;
  return body;
}

void expect_still_serving(int port) {
  RawConnection c(port);
  c.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(c.read_reply(60).status, 200);
}

TEST(ServeHttp, UnknownPathWithPercentEncodedInvalidUtf8Gets404Json) {
  InProcessServer server(small_limits());
  error_reply(server.port(), "GET /%ff%fe HTTP/1.1\r\nHost: x\r\n\r\n", 404);
  expect_still_serving(server.port());
}

TEST(ServeHttp, UnknownPathWithRawInvalidUtf8BytesGets404Json) {
  InProcessServer server(small_limits());
  error_reply(server.port(), "GET /\xff\xfe\xc3(x HTTP/1.1\r\nHost: x\r\n\r\n", 404);
  expect_still_serving(server.port());
}

TEST(ServeHttp, MalformedJsonWithInvalidUtf8Gets400Json) {
  InProcessServer server(small_limits());
  const json body = error_reply(server.port(), post("{\"path\": \xff\xfe}"), 400);
  EXPECT_NE(body.value("error", "").find("malformed JSON"), std::string::npos) << body;
  error_reply(server.port(), post("{\"path\": \"a\xff.png\""), 400);
  expect_still_serving(server.port());
}

// The image root with an inside image, an inside non-image, a folder, a link out of the root, and
// outside it a secret image and a secret non-image: a prober must not tell outside files apart.
class ServeHttpRoot : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_ / "root";
    fs::create_directories(root_ / "sub");
    write_text(root_ / "cat.png", fake_png());
    write_text(root_ / "notes.txt", "not an image");
    write_text(dir_ / "secret.png", fake_png());
    write_text(dir_ / "secret.txt", "outside text");
    fs::create_directory_symlink(dir_.path(), root_ / "link");
    auto options = small_limits();
    options.image_root = root_;
    server_ = std::make_unique<InProcessServer>(options);
  }
  RawReply ask(const std::string& path) {
    RawConnection c(server_->port());
    c.send(post(json{{"path", path}}.dump()));
    return c.read_reply(60);
  }
  ScratchDir dir_{"serve-http-root"};
  fs::path root_;
  std::unique_ptr<InProcessServer> server_;
};

TEST_F(ServeHttpRoot, DotDotAfterAMissingFolderCannotFollowALinkOutOfTheRoot) {
  const RawReply secret_image = ask("nope/../link/secret.png");
  EXPECT_NE(secret_image.status, 200) << secret_image.body;
  const RawReply secret_text = ask("nope/../link/secret.txt");
  const RawReply missing = ask("nope/../link/missing.png");
  // One answer for all three: the prober learns nothing of what exists outside.
  EXPECT_EQ(secret_image.status, missing.status);
  EXPECT_EQ(secret_image.body, missing.body);
  EXPECT_EQ(secret_text.status, missing.status);
  EXPECT_EQ(secret_text.body, missing.body);
}

TEST_F(ServeHttpRoot, EveryMissGetsTheSameStatusAndBody) {
  const RawReply reference = ask("missing.png");
  EXPECT_EQ(reference.status, 404) << reference.body;
  for (const std::string& probe : std::vector<std::string>{
           "sub", "sub/", "link/secret.png", "link/secret.txt", "link/missing.png", "../secret.png", "../secret.txt",
           (dir_ / "secret.png").string(), (dir_ / "secret.txt").string(), "/etc/passwd", "/nonexistent/x.png",
           "sub/../../secret.png", "nope/../../secret.txt", "link", "link/"}) {
    const RawReply r = ask(probe);
    EXPECT_EQ(r.status, reference.status) << probe << ": " << r.body;
    EXPECT_EQ(r.body, reference.body) << probe;
  }
}

TEST_F(ServeHttpRoot, AnUnreadableFileGetsTheSameAnswerAsAMissingOne) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads every file";
  write_text(root_ / "locked.png", fake_png());
  fs::permissions(root_ / "locked.png", fs::perms::none);
  const RawReply locked = ask("locked.png");
  const RawReply missing = ask("missing.png");
  EXPECT_EQ(locked.status, missing.status);
  EXPECT_EQ(locked.body, missing.body);
}

TEST_F(ServeHttpRoot, FilesInsideTheRootStillWork) {
  EXPECT_EQ(ask("cat.png").status, 200);
  EXPECT_EQ(ask("sub/../cat.png").status, 200);
  EXPECT_EQ(ask((fs::canonical(root_) / "cat.png").string()).status, 200);
  EXPECT_EQ(ask("notes.txt").status, 415);  // inside the root: the format may be told
}

// A server stopped right after it starts (a test that skips, a config error found late) must stop:
// the listener thread may not have entered its accept loop yet when stop() runs.
TEST(ServeHttp, AServerStoppedAtOnceAfterStartingStops) {
  for (int i = 0; i < 200; ++i) {
    InProcessServer server(small_limits());
  }
}

TEST(ServeHttp, ChunkedBodyOverTheLimitGets413) {
  InProcessServer server(small_limits());  // 4096 bytes
  const std::string body = fake_png() + std::string(64 * 1024, 'x');
  const json reply = error_reply(server.port(), chunked_post(body, 1000), 413);
  EXPECT_NE(reply.value("error", "").find("4096"), std::string::npos) << reply;
  expect_still_serving(server.port());
}

TEST(ServeHttp, ChunkedBodyUnderTheLimitIsServed) {
  InProcessServer server(small_limits());
  RawConnection c(server.port());
  c.send(chunked_post(fake_png() + std::string(3000, 'x'), 700));
  const RawReply r = c.read_reply(60);
  EXPECT_EQ(r.status, 200) << r.body;
}

TEST(ServeHttp, BodyWithoutLengthOrChunkingOverTheLimitGets413) {
  InProcessServer server(small_limits());
  RawConnection c(server.port());
  c.send("POST /v1/classify HTTP/1.0\r\nContent-Type: image/png\r\n\r\n" + fake_png() + std::string(64 * 1024, 'x'));
  const RawReply r = c.read_reply(60);
  EXPECT_EQ(r.status, 413) << r.head << r.body;
}

TEST(ServeHttp, ChunkedBodyToAnotherRouteIsRefusedUnread) {
  InProcessServer server(small_limits());
  RawConnection c(server.port());
  c.send("POST /v2/nothing HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
  // The server must answer without waiting for a body it would have no limit for.
  const RawReply r = c.read_reply(60);
  EXPECT_EQ(r.status, 404) << r.head << r.body;
  EXPECT_TRUE(c.wait_closed_by_peer(60));
}

TEST(ServeHttp, JsonNestedDeeperThan64Gets400NamingTheLimit) {
  InProcessServer server(small_limits());
  const std::string deep = std::string(65, '[') + std::string(65, ']');
  const json reply = error_reply(server.port(), post(deep), 400);
  EXPECT_NE(reply.value("error", "").find("64"), std::string::npos) << reply;
  EXPECT_NE(reply.value("error", "").find("nest"), std::string::npos) << reply;
  const std::string deep_object = "{\"path\": \"a.png\", \"x\": " + std::string(100, '[') + std::string(100, ']') + "}";
  error_reply(server.port(), post(deep_object), 400);
  expect_still_serving(server.port());
}

TEST(ServeHttp, JsonNestedExactly64DeepIsParsed) {
  InProcessServer server(small_limits());  // no --image-root: a well-formed path request gets 403
  const std::string at_limit = "{\"path\": \"a.png\", \"x\": " + std::string(63, '[') + std::string(63, ']') + "}";
  error_reply(server.port(), post(at_limit), 403);
}

TEST(ServeHttp, JsonBodyOverTheJsonLimitGets413) {
  auto options = small_limits();
  options.max_body_bytes = 16u << 20;
  InProcessServer server(options);
  std::string wide = "{\"path\": \"a.png\", \"x\": [0";
  for (int i = 0; i < 100000; ++i) wide += ",1";  // 200 KB that would parse into 100000 values
  wide += "]}";
  error_reply(server.port(), post(wide), 413);
}

}  // namespace
}  // namespace shoplens::testing
