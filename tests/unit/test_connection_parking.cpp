// ConnectionParking on socket pairs: no server, no HTTP library. One end is parked, the test
// writes to and reads from the other; what the parking hands over is collected in a queue.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <mutex>

#include "serve/connection_parking.h"

namespace shoplens::serve {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kLong{600000};

// The test's end of a parked socket pair.
class Peer {
 public:
  Peer() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    parked_ = fds[0];
    mine_ = fds[1];
  }
  ~Peer() { ::close(mine_); }
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;
  int parked_end() const { return parked_; }
  void send(const std::string& bytes) const { ASSERT_EQ(::write(mine_, bytes.data(), bytes.size()), bytes.size()); }
  // True when the parked end was closed within `timeout`.
  bool closed_within(milliseconds timeout) const {
    pollfd p{mine_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return false;
    char byte;
    return ::recv(mine_, &byte, 1, MSG_DONTWAIT) == 0;
  }

 private:
  int parked_ = -1;
  int mine_ = -1;
};

// A parking whose handed-over connections queue up for the test.
class Parking {
 public:
  explicit Parking(ParkingLimits limits)
      : parking_(
            limits, [this](WaitingConnection c) { on_ready(std::move(c)); }, cutoff_) {
    parking_.start();
  }
  ~Parking() {
    parking_.stop();
    for (auto& c : ready_) ::close(c.fd);
  }
  ConnectionParking& operator*() { return parking_; }
  ConnectionParking* operator->() { return &parking_; }
  void park(int fd, std::string received = {}) {
    parking_.park(WaitingConnection{fd, std::move(received), 0, {}, false});
  }
  void drain_now() { cutoff_ = ParkingClock::now().time_since_epoch().count(); }
  // The next handed-over connection, or fd -1 when none came within `timeout`.
  WaitingConnection next(milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!arrived_.wait_for(lock, timeout, [&] { return !ready_.empty(); })) return {};
    WaitingConnection c = std::move(ready_.front());
    ready_.pop_front();
    return c;
  }

 private:
  void on_ready(WaitingConnection c) {
    std::lock_guard<std::mutex> lock(mutex_);
    ready_.push_back(std::move(c));
    arrived_.notify_all();
  }
  std::atomic<ParkingClock::rep> cutoff_{ParkingClock::time_point::max().time_since_epoch().count()};
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::deque<WaitingConnection> ready_;
  ConnectionParking parking_;
};

ParkingLimits limits(milliseconds idle, milliseconds header, std::size_t max_connections = 64) {
  ParkingLimits l;
  l.idle = idle;
  l.header = header;
  l.max_connections = max_connections;
  return l;
}

// What the parking hands over after a client sends `sent` on a fresh connection (fd -1: nothing).
WaitingConnection handed_over(const ParkingLimits& l, const std::string& sent) {
  Parking parking(l);
  Peer peer;
  parking.park(peer.parked_end());
  peer.send(sent);
  WaitingConnection c = parking.next(milliseconds(10000));
  EXPECT_EQ(c.fd, peer.parked_end());
  if (c.fd >= 0) ::close(c.fd);
  c.fd = -2;  // closed: the tests read the record only
  return c;
}

TEST(ConnectionParking, FindsTheBlankLineThatEndsTheHeaders) {
  EXPECT_TRUE(holds_complete_headers("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_TRUE(holds_complete_headers("GET / HTTP/1.1\nHost: x\n\n"));
  EXPECT_FALSE(holds_complete_headers("GET / HTTP/1.1\r\nHost: x\r\n"));
  EXPECT_FALSE(holds_complete_headers("body\r\n\r\nGET / HTTP/1.1\r\n", 10));
}

TEST(ConnectionParking, ABodyWaitsOnlyWhenAPlainContentLengthDeclaresIt) {
  const std::string line = "POST /v1/classify HTTP/1.1\r\n";
  EXPECT_EQ(declared_body_length(line + "Host: x\r\nContent-Length: 42\r\n\r\n"), 42u);
  EXPECT_EQ(declared_body_length(line + "content-length:\t7 \r\n\r\n"), 7u);
  EXPECT_EQ(declared_body_length(line + "Host: x\r\n\r\n"), 0u);
  const auto npos = std::string::npos;
  EXPECT_EQ(declared_body_length(line + "Content-Length: 4\r\nContent-Length: 4\r\n\r\n"), npos);
  EXPECT_EQ(declared_body_length(line + "Content-Length: -4\r\n\r\n"), npos);
  EXPECT_EQ(declared_body_length(line + "Content-Length: 99999999999999999999\r\n\r\n"), npos);
  EXPECT_EQ(declared_body_length(line + "Transfer-Encoding: chunked\r\n\r\n"), npos);
  EXPECT_EQ(declared_body_length(line + "Content-Length: 4\r\nExpect: 100-continue\r\n\r\n"), npos);
}

TEST(ConnectionParking, ABodyOfDeclaredLengthWaitsHereUntilItIsAllIn) {
  Parking parking(limits(kLong, kLong));
  Peer peer;
  parking.park(peer.parked_end());
  const std::string head = "POST /v1/classify HTTP/1.1\r\nContent-Length: 10\r\n\r\n";
  peer.send(head + "0123");
  EXPECT_EQ(parking.next(milliseconds(300)).fd, -1);
  peer.send("456789");
  const WaitingConnection c = parking.next(milliseconds(10000));
  EXPECT_EQ(c.received, head + "0123456789");
  EXPECT_LT(c.body_deadline, ParkingClock::time_point::max());
}

TEST(ConnectionParking, ABodyLateIsHandedOverWithItsDeadlinePassed) {
  ParkingLimits l = limits(kLong, kLong);
  l.body = milliseconds(200);
  const WaitingConnection c = handed_over(l, "POST /v1/classify HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123");
  EXPECT_FALSE(c.header_deadline_passed);
  EXPECT_LE(c.body_deadline, ParkingClock::now());
}

TEST(ConnectionParking, ChunkedAndOversizedBodiesGoToAWorkerWithTheirHeaders) {
  ParkingLimits l = limits(kLong, kLong);
  l.max_body_bytes = 100;
  Parking parking(l);
  Peer chunked, oversized;
  parking.park(chunked.parked_end());
  parking.park(oversized.parked_end());
  chunked.send("POST /v1/classify HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nab");
  EXPECT_EQ(parking.next(milliseconds(10000)).fd, chunked.parked_end());
  oversized.send("POST /v1/classify HTTP/1.1\r\nContent-Length: 101\r\n\r\nab");
  EXPECT_EQ(parking.next(milliseconds(10000)).fd, oversized.parked_end());
}

TEST(ConnectionParking, PastTheBufferBudgetABodyIsReadOnAWorkersThread) {
  ParkingLimits l = limits(kLong, kLong);
  l.max_buffered_bytes = 200;
  const WaitingConnection c =
      handed_over(l, "POST /v1/classify HTTP/1.1\r\nContent-Length: 1000\r\n\r\n" + std::string(300, 'b'));
  EXPECT_LT(c.received.size(), 1000u);
}

TEST(ConnectionParking, HandsOverOnceTheHeadersAreCompleteWithEveryByteRead) {
  Parking parking(limits(kLong, kLong));
  Peer peer;
  parking.park(peer.parked_end());
  peer.send("POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Len");
  EXPECT_EQ(parking.next(milliseconds(300)).fd, -1);
  EXPECT_EQ(parking->waiting(), 1u);
  peer.send("gth: 4\r\n\r\nbo");
  EXPECT_EQ(parking.next(milliseconds(300)).fd, -1);  // the body too
  peer.send("dy");
  const WaitingConnection c = parking.next(milliseconds(10000));
  EXPECT_EQ(c.fd, peer.parked_end());
  EXPECT_EQ(c.received, "POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nbody");
  EXPECT_FALSE(c.header_deadline_passed);
  EXPECT_EQ(parking->waiting(), 0u);
}

TEST(ConnectionParking, HeadersLateAreHandedOverMarkedLate) {
  const WaitingConnection c = handed_over(limits(kLong, milliseconds(200)), "GET /healthz HTTP/1.1\r\nX-Slow: ");
  EXPECT_TRUE(c.header_deadline_passed);
  EXPECT_EQ(c.received, "GET /healthz HTTP/1.1\r\nX-Slow: ");
}

TEST(ConnectionParking, HeadersPastTheSizeLimitAreHandedOverForTheServerToRefuse) {
  ParkingLimits l = limits(kLong, kLong);
  l.max_header_bytes = 1000;
  const WaitingConnection c = handed_over(l, "GET / HTTP/1.1\r\nX-Big: " + std::string(2000, 'a'));
  EXPECT_GE(c.received.size(), 1000u);
}

TEST(ConnectionParking, AConnectionThatSendsNothingIsClosedAtTheIdleDeadline) {
  Parking parking(limits(milliseconds(200), kLong));
  Peer peer;
  parking.park(peer.parked_end());
  EXPECT_TRUE(peer.closed_within(milliseconds(10000)));
  EXPECT_EQ(parking.next(milliseconds(0)).fd, -1);
}

TEST(ConnectionParking, AClientThatClosesWhileWaitingIsDropped) {
  Parking parking(limits(kLong, kLong));
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  parking.park(fds[0]);
  ::close(fds[1]);
  for (int i = 0; i < 200 && parking->waiting() > 0; ++i) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_EQ(parking->waiting(), 0u);
  EXPECT_EQ(parking.next(milliseconds(0)).fd, -1);
}

TEST(ConnectionParking, WhenFullTheConnectionWaitingLongestMakesRoom) {
  Parking parking(limits(kLong, kLong, /*max_connections=*/3));
  std::vector<std::unique_ptr<Peer>> peers;
  for (int i = 0; i < 4; ++i) {
    peers.push_back(std::make_unique<Peer>());
    parking.park(peers.back()->parked_end());
    std::this_thread::sleep_for(milliseconds(20));  // distinct arrival times
  }
  EXPECT_TRUE(peers[0]->closed_within(milliseconds(10000)));
  for (int i = 1; i < 4; ++i) EXPECT_FALSE(peers[i]->closed_within(milliseconds(50))) << i;
  EXPECT_EQ(parking->evicted(), 1u);
  EXPECT_EQ(parking->waiting(), 3u);
  peers[3]->send("GET / HTTP/1.1\r\n\r\n");  // the newest still gets served
  EXPECT_EQ(parking.next(milliseconds(10000)).fd, peers[3]->parked_end());
}

TEST(ConnectionParking, ARequestAlreadyReceivedIsHandedOverAtOnce) {
  Parking parking(limits(kLong, kLong));
  Peer peer;
  parking.park(peer.parked_end(), "GET /healthz HTTP/1.1\r\n\r\n");
  const WaitingConnection c = parking.next(milliseconds(10000));
  EXPECT_EQ(c.fd, peer.parked_end());
  EXPECT_EQ(c.received, "GET /healthz HTTP/1.1\r\n\r\n");
}

TEST(ConnectionParking, TheDrainCutoffClosesEveryWaitingConnection) {
  Parking parking(limits(kLong, kLong));
  Peer silent, half_sent;
  parking.park(silent.parked_end());
  parking.park(half_sent.parked_end());
  half_sent.send("GET / HTTP/1.1\r\n");
  std::this_thread::sleep_for(milliseconds(100));
  parking.drain_now();
  EXPECT_TRUE(silent.closed_within(milliseconds(10000)));
  EXPECT_TRUE(half_sent.closed_within(milliseconds(10000)));
  EXPECT_EQ(parking.next(milliseconds(0)).fd, -1);  // no 408 during a drain: closed
}

TEST(ConnectionParking, StopClosesTheWaitingAndLaterArrivalsAtOnce) {
  Parking parking(limits(kLong, kLong));
  Peer waiting, later;
  parking.park(waiting.parked_end());
  std::this_thread::sleep_for(milliseconds(50));
  parking->stop();
  EXPECT_TRUE(waiting.closed_within(milliseconds(1000)));
  parking.park(later.parked_end());
  EXPECT_TRUE(later.closed_within(milliseconds(1000)));
}

TEST(ConnectionParking, ClosingGracefullyDropsInputThenCloses) {
  ParkingLimits l = limits(kLong, kLong);
  l.linger = milliseconds(200);
  Parking parking(l);
  Peer peer;
  parking->close_gracefully(peer.parked_end());
  peer.send("the rest of a body nobody reads");
  EXPECT_TRUE(peer.closed_within(milliseconds(10000)));
  EXPECT_EQ(parking.next(milliseconds(0)).fd, -1);
}

}  // namespace
}  // namespace shoplens::serve
