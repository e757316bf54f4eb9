// Slow clients against the HTTP frontend, in process (tests/serve_test_util.h): a client that
// sends one byte every 100 ms never trips a per-read timeout, so only whole-phase deadlines (the
// headers, the body, the idle time between requests) and the drain can free its thread.
//
// No tight wall-clock bounds: the deadlines under test are 1 s, the tests allow 30 s for them, and
// without the deadlines the slow clients would hold on for 40 s or more.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <chrono>
#include <filesystem>

#include <future>
#include <memory>
#include <thread>
#include <vector>

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

// The backlog of this process's socket listening on `port` (Linux reports a listening socket's
// backlog limit in tcpi_sacked); -1 when none is found.
long listen_backlog_of(int port) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    const int fd = std::atoi(entry.path().filename().c_str());
    int listening = 0;
    socklen_t len = sizeof listening;
    sockaddr_in addr{};
    socklen_t addr_len = sizeof addr;
    if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || listening == 0) continue;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &addr_len) != 0 || addr.sin_family != AF_INET ||
        ntohs(addr.sin_port) != port)
      continue;
    tcp_info info{};
    socklen_t info_len = sizeof info;
    if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &info_len) == 0) return info.tcpi_sacked;
  }
  return -1;
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

// Far more connections than threads, each holding half its headers, with deadlines of 10 minutes:
// they wait off the pool (ConnectionParking), so /healthz is answered at once, not after them.
TEST(ServeSlowClients, HealthzAnswersWhileFarMoreClientsThanThreadsHoldHalfSentHeaders) {
  InProcessServer server(deadlines(600000, 600000, 600000, /*threads=*/2));
  std::vector<std::unique_ptr<RawConnection>> flood;
  for (int i = 0; i < 50; ++i) {
    flood.push_back(std::make_unique<RawConnection>(server.port()));
    ASSERT_TRUE(flood.back()->send("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Half: "));
  }
  RawConnection c(server.port());
  c.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(c.read_reply(30).status, 200);
  // And each flooder still gets its answer once it finishes its headers.
  ASSERT_TRUE(flood.front()->send("1\r\n\r\n"));
  EXPECT_EQ(flood.front()->read_reply(30).status, 200);
}

// The same with bodies: each client sent its headers and the start of a body of declared length.
TEST(ServeSlowClients, HealthzAnswersWhileFarMoreClientsThanThreadsHoldHalfSentBodies) {
  InProcessServer server(deadlines(600000, 600000, 600000, /*threads=*/2));
  const std::size_t length = 100000;
  std::vector<std::unique_ptr<RawConnection>> flood;
  for (int i = 0; i < 50; ++i) {
    flood.push_back(std::make_unique<RawConnection>(server.port()));
    ASSERT_TRUE(flood.back()->send(slow_body_head(length)));
  }
  RawConnection c(server.port());
  c.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(c.read_reply(30).status, 200);
  ASSERT_TRUE(flood.front()->send(std::string(length - fake_png().size(), 'x')));
  EXPECT_EQ(flood.front()->read_reply(30).status, 200);
}

TEST(ServeSlowClients, HeadersThatWaitedOffThePoolPastTheirDeadlineGet408) {
  InProcessServer server(deadlines(500, 600000, 600000, /*threads=*/2));
  RawConnection c(server.port());
  c.send("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: a");
  const RawReply reply = c.read_reply(30);
  EXPECT_EQ(reply.status, 408);
  EXPECT_NE(reply.body.find("--header-timeout-ms"), std::string::npos);
}

TEST(ServeSlowClients, ABodyThatWaitedOffThePoolPastItsDeadlineGets408) {
  InProcessServer server(deadlines(600000, 500, 600000, /*threads=*/2));
  RawConnection c(server.port());
  c.send(slow_body_head(100000));
  const RawReply reply = c.read_reply(30);
  EXPECT_EQ(reply.status, 408);
  EXPECT_NE(reply.body.find("--body-timeout-ms"), std::string::npos);
}

// How many of `connections` the server has closed, once at least `want` are or `timeout_s` passed.
std::size_t closed_by_server(const std::vector<std::unique_ptr<RawConnection>>& connections, std::size_t want,
                             double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    std::size_t closed = 0;
    for (const auto& c : connections) closed += c->wait_closed_by_peer(0) ? 1 : 0;
    if (closed >= want || std::chrono::steady_clock::now() >= deadline) return closed;
    std::this_thread::sleep_for(milliseconds(20));
  }
}

// Silent connections past --max-waiting-connections are closed, so a new client is never locked
// out by a flood of idle sockets. Which ones go is not asserted here: a connection's wait starts
// when a pool thread parks it, and under load the pool's two threads may park them out of
// connect order (ConnectionParking.WhenFullTheConnectionWaitingLongestMakesRoom checks the order).
TEST(ServeSlowClients, SilentConnectionsPastTheWaitingLimitMakeRoomForNewClients) {
  serve::FrontendOptions o = deadlines(600000, 600000, 600000, /*threads=*/2);
  o.max_waiting_connections = 8;
  InProcessServer server(o);
  std::vector<std::unique_ptr<RawConnection>> flood;
  for (int i = 0; i < 20; ++i) flood.push_back(std::make_unique<RawConnection>(server.port()));
  RawConnection c(server.port());
  c.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(c.read_reply(30).status, 200);
  EXPECT_GE(closed_by_server(flood, 12, 30), 12u);  // 21 arrived, 8 may wait
  c.send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string metrics = c.read_reply(30).body;
  const std::string name = "\nshoplens_serve_connections_evicted_total ";
  const auto at = metrics.find(name);
  ASSERT_NE(at, std::string::npos) << metrics;
  EXPECT_GE(std::atoi(metrics.c_str() + at + name.size()), 12);  // 21 arrived, 8 may wait, 1 answered
}

// A burst of clients connecting at once must not overflow the accept queue (cpp-httplib listens
// with a backlog of 5: the kernel drops the SYNs past it and each such client waits a second).
TEST(ServeSlowClients, TheAcceptQueueHoldsABurstOfNewConnections) {
  InProcessServer server(deadlines(1000, 1000, 1000));
  EXPECT_GE(listen_backlog_of(server.port()), 128);
}

// Requests sent back to back on one connection, and one after another: each answered in order
// whether the next one's headers came with the last one's or later (through the parking).
TEST(ServeSlowClients, KeptAliveAndPipelinedRequestsAreAllAnswered) {
  InProcessServer server(deadlines(600000, 600000, 600000, /*threads=*/2));
  RawConnection c(server.port());
  const std::string healthz = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string ready = "GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n";
  c.send(healthz + ready);
  EXPECT_EQ(c.read_reply(30).status, 200);
  const RawReply second = c.read_reply(30);
  EXPECT_EQ(second.status, 200);
  EXPECT_NE(second.body.find("ready"), std::string::npos);
  std::this_thread::sleep_for(milliseconds(200));  // the connection is parked between requests
  c.send(healthz);
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
