// How the frontend's cpp-httplib server reads its connections (only http_frontend.cpp uses this;
// it includes httplib.h, so it needs Debian's httplib build flags, src/CMakeLists.txt).
//
// cpp-httplib 0.11's read timeout is per read: a client that sends one byte every few seconds holds
// a pool thread forever, and a drain waits for it. DeadlineServer replaces the per-connection loop
// (process_and_close_socket, a virtual of httplib::Server) with one whose reads end at a deadline
// per phase of a request: waiting for the next request on a kept-alive connection (idle), from the
// first byte to the end of the headers, from there to the end of the body; and, once a drain has
// begun, at the drain's cutoff whatever the phase.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>

namespace shoplens::serve {

struct ReadDeadlines {
  std::chrono::milliseconds idle{5000};
  std::chrono::milliseconds header{10000};
  std::chrono::milliseconds body{60000};
};

class DeadlineServer : public httplib::Server {
 public:
  explicit DeadlineServer(ReadDeadlines deadlines);

  // Reads of every connection (waiting, headers, body) end `grace` from now at the latest.
  void begin_drain(std::chrono::milliseconds grace);

  // For handlers, about the connection of the request they are handling (they run on its thread):
  // the headers are in, the body's deadline starts now (the pre-routing handler calls it);
  static void headers_received();
  // the request was not read to its end: close the connection once the answer is written;
  static void close_after_response();
  // the last read failed because a deadline passed (answer 408, not 400).
  static bool deadline_passed();

 private:
  bool process_and_close_socket(socket_t sock) override;

  ReadDeadlines deadlines_;
  std::atomic<std::chrono::steady_clock::rep> drain_cutoff_;  // time_since_epoch ticks; max: none
};

}  // namespace shoplens::serve
