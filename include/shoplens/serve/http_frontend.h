// The HTTP side of `shoplens serve` (cpp-httplib, hidden behind this header):
//   POST /v1/classify  image bytes, or JSON {"path": "..."} under --image-root -> label, probabilities
//   GET  /healthz      200 while the process serves
//   GET  /readyz       200 only after warm-up and until draining starts, else 503
//   GET  /metrics      Prometheus text (ServeMetrics)
// Bad input gets a 4xx with a JSON {"error": ...}; a full queue a 503 with Retry-After.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "shoplens/serve/micro_batcher.h"
#include "shoplens/serve/serve_metrics.h"

namespace shoplens::serve {

// The longest read deadline accepted (one hour): anything longer is a typo or an attack's wish.
constexpr double kMaxTimeoutMs = 3600000;
// The largest --max-body-bytes (1 GiB): a body is held whole in memory while it is decoded.
constexpr std::size_t kMaxBodyBytes = std::size_t{1} << 30;

struct FrontendOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                         // 0: the system picks a free port
  std::filesystem::path image_root;        // empty: JSON {"path"} requests are refused
  std::size_t max_body_bytes = 16u << 20;  // larger bodies: 413
  int http_threads = 64;                   // requests handled at once (each waits for its batch)
  // Connections waiting for a request of theirs to arrive (no thread each); more: the longest
  // waiter is closed. Lowered to what the open-file limit leaves room for.
  int max_waiting_connections = 1024;
  double request_timeout_ms = 2000;  // the batcher's timeout; the handler waits a little longer
  // Whole-phase read deadlines (a per-read timeout never ends a client that sends a byte a second):
  double header_timeout_ms = 10000;  // a request's first byte to the end of its headers
  double body_timeout_ms = 60000;    // the end of the headers to the end of the body
  double idle_timeout_ms = 5000;     // a kept-alive connection waiting for its next request
};

// Told the bytes of pixels a decode is about to allocate, before it does (DecodeOptions::
// before_allocating): it waits for room in the server's decode budget, or throws.
using PixelReservation = std::function<void(std::uint64_t bytes)>;
// Image bytes -> the model's input (CHW floats); the decoder calls `reserve` before it allocates.
// Throws DataError when they do not decode, and what `reserve` throws.
using Preprocessor =
    std::function<std::vector<float>(const std::uint8_t* data, std::size_t size, const PixelReservation& reserve)>;

class HttpFrontend {
 public:
  HttpFrontend(FrontendOptions options, MicroBatcher& batcher, ServeMetrics& metrics, Preprocessor preprocess,
               std::vector<std::string> class_names);
  ~HttpFrontend();

  // Binds and starts listening on a background thread; returns the port. IoError if it cannot bind.
  int start();
  void set_ready(bool ready);
  // Bytes of decoded pixels that requests may hold at once (unlimited until set): an image larger
  // than that gets 422, one that finds no room within --request-timeout-ms 503 with Retry-After.
  void set_decode_budget(std::uint64_t bytes);
  // From now on classify answers 503 (shutting down) and /readyz 503; returns once every request
  // admitted before has reached the batcher's queue (so draining the queue answers them all).
  void begin_drain();
  // Waits until no classify handler is running (their responses are written); false on timeout.
  bool wait_idle(double timeout_s);
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace shoplens::serve
