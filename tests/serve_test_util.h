// In-process serving for the HTTP frontend's tests: the real HttpFrontend and MicroBatcher on an
// ephemeral loopback port, with a fake model (fixed probabilities) and a fake preprocessor (no
// decoding: any bytes that sniff as an image are accepted), and a raw TCP client that sends
// exactly the bytes a test gives it (no HTTP library in between, so it can be as hostile as the
// test needs: broken UTF-8, chunked bodies, one byte every so often).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "shoplens/serve/http_frontend.h"
#include "shoplens/serve/micro_batcher.h"
#include "shoplens/serve/serve_metrics.h"

namespace shoplens::testing {

// The smallest body the frontend takes for image bytes: PNG's signature (the fake preprocessor
// does not decode, so nothing else is needed).
std::string fake_png();
// A fake image whose "decode" reserves `bytes` of the server's decode budget and holds them for
// `hold_ms` (the fake preprocessor reads both from the body), as a real decode of that size would.
std::string fake_png_decoding(std::uint64_t bytes, int hold_ms = 0);

// Four HTTP threads and bodies of at most 4 KiB: enough for every hostile-client test.
serve::FrontendOptions small_limits();

class InProcessServer {
 public:
  // `options.port` is ignored (0: any free port). Starts listening and marks the server ready.
  explicit InProcessServer(serve::FrontendOptions options);
  ~InProcessServer();
  int port() const { return port_; }
  serve::HttpFrontend& frontend() { return *frontend_; }
  // The server's drain as run_server does it: refuse new work, flush the queue, stop listening.
  void drain_and_stop();

 private:
  serve::ServeMetrics metrics_{4};
  std::unique_ptr<serve::MicroBatcher> batcher_;
  std::unique_ptr<serve::HttpFrontend> frontend_;
  int port_ = 0;
  bool stopped_ = false;
};

struct RawReply {
  int status = 0;  // 0: no complete status line arrived
  std::string head;
  std::string body;
};

// One TCP connection to 127.0.0.1:port. Sends never raise SIGPIPE.
class RawConnection {
 public:
  explicit RawConnection(int port);
  ~RawConnection();
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;
  bool connected() const { return fd_ >= 0; }
  // False once the peer is gone.
  bool send(const std::string& bytes);
  // One response (head + Content-Length body), or what arrived before the peer closed or the
  // deadline passed.
  RawReply read_reply(double timeout_s);
  // True when the peer closed (FIN or reset) within `timeout_s`; discards what it sends.
  bool wait_closed_by_peer(double timeout_s);

 private:
  int fd_ = -1;
  std::string pending_;  // read past the end of the last reply
};

// Sends `at_once`, then `bytes` one at a time, `interval` apart, from a thread of its own, until
// they are all sent, the server closes the connection, or `give_up` has passed.
class Dribbler {
 public:
  Dribbler(int port, std::string at_once, std::string bytes, std::chrono::milliseconds interval,
           std::chrono::seconds give_up);
  ~Dribbler();  // joins
  // Waits up to `timeout_s` for the dribbling to end; true when the server had closed by then.
  bool wait_closed_by_server(double timeout_s);

 private:
  void run(const std::string& at_once, const std::string& bytes, std::chrono::milliseconds interval,
           std::chrono::seconds give_up);
  RawConnection connection_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> done_{false};
  std::atomic<bool> closed_by_server_{false};
  std::thread thread_;
};

// Endless header lines ("X-Slow-N: ...\r\n"), enough for any test's patience.
std::string endless_headers(const std::string& request_line, std::size_t bytes);

}  // namespace shoplens::testing
