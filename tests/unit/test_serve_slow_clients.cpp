// Slow clients against the HTTP frontend, in process (tests/serve_test_util.h): a client that
// sends one byte every 100 ms never trips a per-read timeout, so only whole-phase deadlines (the
// headers, the body, the idle time between requests) and the drain can free its thread.
//
// No tight wall-clock bounds: the deadlines under test are 1 s, the tests allow 30 s for them, and
// without the deadlines the slow clients would hold on for 40 s or more.
#include <gtest/gtest.h>

#include <future>

#include "serve_test_util.h"

namespace shoplens::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr milliseconds kDribble{100};

serve::FrontendOptions deadlines(double header_ms, double body_ms, double idle_ms, int threads = 4) {
  serve::FrontendOptions o;
  o.http_threads = threads;
  o.header_timeout_ms = header_ms;
  o.body_timeout_ms = body_ms;
  o.idle_timeout_ms = idle_ms;
  return o;
}

std::string slow_body_head(std::size_t length) {
  return "POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\nContent-Length: " +
         std::to_string(length) + "\r\n\r\n" + fake_png();
}

TEST(ServeSlowClients, HeadersDribbledOneByteAtATimeAreCutAtTheHeaderDeadline) {
  InProcessServer server(deadlines(1000, 600000, 600000));
  Dribbler slow(server.port(), "", endless_headers("GET /healthz HTTP/1.1", 100000), kDribble, seconds(40));
  EXPECT_TRUE(slow.wait_closed_by_server(30));
}

TEST(ServeSlowClients, BodyDribbledOneByteAtATimeIsCutAtTheBodyDeadline) {
  InProcessServer server(deadlines(600000, 1000, 600000));
  Dribbler slow(server.port(), slow_body_head(100000), std::string(100000, 'x'), kDribble, seconds(40));
  EXPECT_TRUE(slow.wait_closed_by_server(30));
}

TEST(ServeSlowClients, HealthzAnswersWhileSlowClientsHoldEveryHttpThread) {
  InProcessServer server(deadlines(1000, 1000, 1000, /*threads=*/2));
  Dribbler head(server.port(), "", endless_headers("GET /healthz HTTP/1.1", 100000), kDribble, seconds(40));
  Dribbler body(server.port(), slow_body_head(100000), std::string(100000, 'x'), kDribble, seconds(40));
  std::this_thread::sleep_for(milliseconds(300));  // both connections taken by the pool first
  RawConnection c(server.port());
  c.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(c.read_reply(30).status, 200);
}

TEST(ServeSlowClients, IdleKeepAliveConnectionIsClosedAtTheIdleTimeout) {
  InProcessServer server(deadlines(600000, 600000, 1000));
  RawConnection c(server.port());
  c.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(c.read_reply(30).status, 200);
  EXPECT_TRUE(c.wait_closed_by_peer(30));
}

// Deadlines of 10 minutes: only the drain can free these threads.
TEST(ServeSlowClients, DrainFinishesPromptlyWithSlowClientsConnected) {
  InProcessServer server(deadlines(600000, 600000, 600000, /*threads=*/8));
  Dribbler head(server.port(), "", endless_headers("GET /healthz HTTP/1.1", 100000), kDribble, seconds(60));
  Dribbler body(server.port(), slow_body_head(100000), std::string(100000, 'x'), kDribble, seconds(60));
  RawConnection idle(server.port());
  idle.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_EQ(idle.read_reply(30).status, 200);
  std::this_thread::sleep_for(milliseconds(300));  // the slow ones have started sending

  auto drained = std::async(std::launch::async, [&] { server.drain_and_stop(); });
  EXPECT_EQ(drained.wait_for(seconds(30)), std::future_status::ready);
  EXPECT_TRUE(head.wait_closed_by_server(30));
  EXPECT_TRUE(body.wait_closed_by_server(30));
  EXPECT_TRUE(idle.wait_closed_by_peer(30));
}

}  // namespace
}  // namespace shoplens::testing
