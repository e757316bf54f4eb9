// How the frontend's cpp-httplib server reads its connections (only http_frontend.cpp uses this;
// it includes httplib.h, so it needs Debian's httplib build flags, src/CMakeLists.txt).
//
// cpp-httplib 0.11 gives each connection a pool thread from accept to close, and its read timeout
// is per read: a client that sends one byte every few seconds holds a thread forever, and a few
// hundred silent connections hold them all. DeadlineServer replaces the per-connection loop
// (process_and_close_socket, a virtual of httplib::Server): a connection waits for its next
// request's headers in ConnectionParking (one polling thread for all of them, with the idle and
// header deadlines), and takes a pool thread only to read its body and be answered, with reads that
// end at the body's deadline; once a drain has begun, at the drain's cutoff whatever the phase.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "serve/connection_parking.h"

namespace shoplens::serve {

struct ReadDeadlines {
  std::chrono::milliseconds idle{5000};
  std::chrono::milliseconds header{10000};
  std::chrono::milliseconds body{60000};
};

class DeadlineServer : public httplib::Server {
 public:
  // `threads` answer requests; up to `max_waiting_connections` wait for theirs (ConnectionParking),
  // bodies up to `max_body_bytes` included.
  DeadlineServer(ReadDeadlines deadlines, std::size_t threads, std::size_t max_waiting_connections,
                 std::size_t max_body_bytes);
  ~DeadlineServer() override;

  // After a bind: cpp-httplib 0.11 listens with a backlog of 5, so a burst of new connections
  // overflows it and the kernel drops their SYNs (each client then waits a 1 s retransmission).
  void widen_listen_backlog();

  // Connections waiting for a request now; those closed so far to make room for newer ones.
  std::size_t connections_waiting() const { return parking_.waiting(); }
  std::size_t connections_evicted() const { return parking_.evicted(); }

  // Reads of every connection (waiting, headers, body) end `grace` from now at the latest.
  void begin_drain(std::chrono::milliseconds grace);

  // For handlers, about the connection of the request they are handling (they run on its thread):
  // the headers are in, the body's deadline starts now (the pre-routing handler calls it);
  static void headers_received();
  // the request was not read to its end: close the connection once the answer is written;
  static void close_after_response();
  // the last read failed because a deadline passed (answer 408, not 400);
  static bool deadline_passed();
  // why the request's chunked body was refused (request_framing.h), empty when it was not.
  static std::string body_fault();

  // The body of an answer the server writes itself, to a request it refuses before cpp-httplib
  // reads it (a head against the framing rules, request_framing.h, or over the size limit): from
  // the status and the reason. Without one, the reason as plain text.
  using EarlyAnswer = std::function<std::string(int status, const std::string& why)>;
  void set_early_answer(EarlyAnswer answer) { early_answer_ = std::move(answer); }

 private:
  class Pool;
  static ParkingLimits parking_limits(ReadDeadlines deadlines, std::size_t max_waiting_connections,
                                      std::size_t max_body_bytes);
  bool process_and_close_socket(socket_t sock) override;
  // On a pool thread: answers the connection's requests while their headers are already in.
  void serve(WaitingConnection connection);

  ReadDeadlines deadlines_;
  std::atomic<std::chrono::steady_clock::rep> drain_cutoff_;  // time_since_epoch ticks; max: none
  ConnectionParking parking_;
  httplib::TaskQueue* pool_ = nullptr;  // httplib owns it (listen's lifetime); parking_ stops first
  EarlyAnswer early_answer_;
};

}  // namespace shoplens::serve
