// Where the frontend's connections wait while no request of theirs is complete: one thread polls
// them all (epoll), so a connection costs a pool thread only once its request's headers are in.
//
// Before this, each connection held one of the `--http-threads` from accept to the end of its
// request: a few hundred clients that connect and send nothing, half their headers or half their
// body took every thread, and `/healthz` waited for their deadlines. Here they wait in one place,
// each with its deadline (idle before the first byte, headers after it, then the body), as nginx
// buffers a request before it reaches the upstream; when the place is full the connection that has
// waited longest is closed to make room, so new clients always get in.
//
// A body waits here only when its length is declared (Content-Length, no Transfer-Encoding, no
// Expect: 100-continue, within the server's body limit) and the bytes held by all waiting
// connections stay within a budget; any other request is handed over once its headers are in, and
// its worker reads the rest. The only HTTP parsed here is that: the blank line ending the headers
// and the body's framing (request_framing.h, the rules the worker applies too). What a worker does with the bytes
// (cpp-httplib, http_connection.cpp) is not this file's business.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "serve/request_framing.h"

namespace shoplens::serve {

using ParkingClock = std::chrono::steady_clock;

// A steady_clock time kept in an atomic as its tick count (the drain cutoff), back as a time.
inline ParkingClock::time_point from_ticks(ParkingClock::rep ticks) {
  return ParkingClock::time_point(ParkingClock::duration(ticks));
}
// Shuts both directions of a connection and closes it.
void close_socket(int fd);

// A connection between requests, and what it has sent of the next one.
struct WaitingConnection {
  int fd = -1;
  std::string received;                 // bytes read and not yet handled: the start of the next request
  std::size_t served = 0;               // requests already answered on this connection
  ParkingClock::time_point first_byte;  // when the first byte of `received` arrived
  bool header_deadline_passed = false;  // handed over because the headers did not complete in time
  // Set when the headers were complete here: the body must be in by then (time_point::max: no
  // limit yet, the worker starts the body's deadline when it reads the headers).
  ParkingClock::time_point body_deadline = ParkingClock::time_point::max();
};

// Where the blank line that ends a request's header section (CRLF CRLF, or LF LF) ends, searching
// from `from`; npos while it has not arrived.
std::size_t end_of_headers(const std::string& bytes, std::size_t from = 0);
inline bool holds_complete_headers(const std::string& bytes, std::size_t from = 0) {
  return end_of_headers(bytes, from) != std::string::npos;
}

// The body length a header section (request line to blank line) declares, when the body can wait
// in the parking: a sound head (request_framing.h) with Content-Length (0 without one), no
// Expect: 100-continue, at most kLongestParkedLength. npos for anything else (a refused head,
// chunked, Expect, a huge length): those go to a worker with their headers, which answers them.
constexpr std::size_t kLongestParkedLength = 999999999999999;  // 15 digits
std::size_t declared_body_length(std::string_view header_section);

struct ParkingLimits {
  std::chrono::milliseconds idle{5000};                 // no byte of a (next) request for this long: closed
  std::chrono::milliseconds header{10000};              // first byte to the end of the headers: handed over, late
  std::size_t max_connections = 1024;                   // more waiting than this: the longest waiter is closed
  std::size_t max_header_bytes = kMaxRequestHeadBytes;  // received this much without a blank line: handed over
  std::chrono::milliseconds linger{1000};               // closing connections drop input this long at most
  std::chrono::milliseconds body{60000};                // end of the headers to the end of a waiting body
  std::size_t max_body_bytes = 16u << 20;               // a longer declared body is handed over (its 413)
  std::size_t max_buffered_bytes = 64u << 20;           // all waiting connections' bytes; past it, hand over
};

class ConnectionParking {
 public:
  // `ready` gets each connection whose headers are complete (or late, or too long), on the parking
  // thread: it must not block. `drain_cutoff` (steady_clock ticks) closes everything waiting once
  // passed, the way a drain ends reads.
  ConnectionParking(ParkingLimits limits, std::function<void(WaitingConnection)> ready,
                    const std::atomic<ParkingClock::rep>& drain_cutoff);
  ~ConnectionParking();
  ConnectionParking(const ConnectionParking&) = delete;
  ConnectionParking& operator=(const ConnectionParking&) = delete;

  void start();
  // Closes every connection still waiting and joins the thread; later calls of park and
  // close_gracefully close their socket at once.
  void stop();

  // Takes the socket: it waits here until its next request's headers are in.
  void park(WaitingConnection connection);
  // Takes the socket: shuts its sending side, drops what the client still sends (up to
  // `limits.linger`) so the last answer is not destroyed by a reset, then closes it.
  void close_gracefully(int fd);

  std::size_t waiting() const { return waiting_.load(); }
  std::size_t evicted() const { return evicted_.load(); }

 private:
  struct Entry {
    WaitingConnection connection;
    ParkingClock::time_point parked_at;
    bool lingering = false;         // closing: input is read and dropped until the peer closes or linger ends
    std::size_t request_bytes = 0;  // > 0: the headers are in, the body waits until this many bytes
  };
  // After new bytes: true when the entry stays parked, false when it was handed over.
  bool keep_waiting(int fd, Entry& entry, std::size_t scan_from);
  // Queues an arrival for the parking thread; false once stopped (the caller closes the socket).
  bool hand_to_thread(Entry entry);
  void run();
  void take_arrivals();
  bool add(Entry entry);  // false: the socket could not be polled and was closed
  void evict_one();
  void on_readable(int fd);
  void expire(ParkingClock::time_point now);
  void hand_over(int fd, bool late);
  void drop(int fd);
  int wait_ms(ParkingClock::time_point now) const;
  ParkingClock::time_point deadline_of(const Entry& e) const;

  ParkingLimits limits_;
  std::function<void(WaitingConnection)> ready_;
  const std::atomic<ParkingClock::rep>& drain_cutoff_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: arrivals or a stop
  std::thread thread_;
  std::mutex mutex_;
  std::vector<Entry> arrivals_;  // guarded by mutex_
  bool stopped_ = false;         // guarded by mutex_
  bool started_ = false;
  std::unordered_map<int, Entry> entries_;  // the parking thread's only
  std::array<char, 4096> chunk_;            // the parking thread's receive buffer
  std::size_t buffered_bytes_ = 0;          // the parking thread's only: sum of entries' received sizes
  std::atomic<std::size_t> waiting_{0};
  std::atomic<std::size_t> evicted_{0};
};

}  // namespace shoplens::serve
