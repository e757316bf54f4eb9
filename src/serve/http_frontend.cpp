// cpp-httplib is compiled with the flags Debian's libcpp-httplib was built with (src/CMakeLists.txt
// sets them on the files that include it): its classes' layout depends on them.
#include "shoplens/serve/http_frontend.h"

#include <httplib.h>
#include <sys/resource.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <thread>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "serve/decode_budget.h"
#include "serve/http_connection.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/json_limits.h"
#include "shoplens/data/image_io.h"
#include "shoplens/serve/image_root.h"

namespace shoplens::serve {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// A {"path": ...} request is a few hundred bytes; a larger JSON body is refused before parsing, as
// parsing costs ~30x its size in memory (and a 16 MB body of nested arrays half a gigabyte).
constexpr std::size_t kMaxJsonBodyBytes = 64 * 1024;
// Once a drain starts, connections still waiting for or sending a request get this much longer.
constexpr std::chrono::milliseconds kDrainGrace{1000};
// The one answer to a path that is missing, outside the root, not a regular file or unreadable: a
// prober must not tell these apart (nor learn anything of the files outside the root).
constexpr const char* kNoSuchImage = "no readable image file at that path under the image root";

// Answers echo the request (its path, a parse error's excerpt): bytes that are not UTF-8 are
// replaced (U+FFFD), as nlohmann::json would otherwise throw while writing the answer.
std::string json_text(const json& body) { return body.dump(-1, ' ', false, json::error_handler_t::replace); }
std::string error_json(int status, const std::string& message) {
  return json_text(json{{"error", message}, {"status", status}});
}
void reply_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(json_text(body), "application/json");
}
void reply_error(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_content(error_json(status, message), "application/json");
}
// For steps that answer on failure and tell their caller to stop.
bool refuse(httplib::Response& res, int status, const std::string& message) {
  reply_error(res, status, message);
  return false;
}

bool looks_like_json(const httplib::Request& req, const std::string& body) {
  if (req.get_header_value("Content-Type").find("json") != std::string::npos) return true;
  for (char c : body) {
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    return c == '{' || c == '[';
  }
  return false;
}

bool reads_a_body(const std::string& method) {
  return method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE" || method == "PRI";
}

// The head passed the framing rules (request_framing.h) before httplib parsed it, so its one
// Content-Length is digits and its Transfer-Encoding, if any, is chunked: httplib reads them as sent.
bool declares_a_body(const httplib::Request& req) {
  return req.has_header("Transfer-Encoding") ||
         std::strtoull(req.get_header_value("Content-Length").c_str(), nullptr, 10) > 0;
}

std::chrono::milliseconds to_ms(double ms) { return std::chrono::milliseconds(static_cast<long long>(std::ceil(ms))); }

ReadDeadlines read_deadlines(const FrontendOptions& o) {
  return {to_ms(o.idle_timeout_ms), to_ms(o.header_timeout_ms), to_ms(o.body_timeout_ms)};
}

// Files open besides the waiting connections: the pool's requests, the model, logs, the listener.
constexpr rlim_t kFilesBesideWaitingConnections = 128;

// Every waiting connection is an open file, and once the limit is reached the server cannot accept
// (even a /healthz): the soft limit is raised to the hard one (as Go's runtime and nginx do), and
// no more connections wait than what is left of it beside the pool's.
std::size_t waiting_connections_allowed(const FrontendOptions& o) {
  const auto wanted = static_cast<std::size_t>(std::max(1, o.max_waiting_connections));
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) != 0) return wanted;
  if (files.rlim_cur < files.rlim_max) {
    rlimit raised = files;
    raised.rlim_cur = files.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) files = raised;
  }
  const rlim_t reserved = static_cast<rlim_t>(std::max(1, o.http_threads)) + kFilesBesideWaitingConnections;
  if (files.rlim_cur == RLIM_INFINITY || files.rlim_cur >= reserved + wanted) return wanted;
  const std::size_t allowed = files.rlim_cur > reserved + 16 ? files.rlim_cur - reserved : 16;
  spdlog::warn("serve: --max-waiting-connections lowered from " + std::to_string(wanted) + " to " +
               std::to_string(allowed) + ": the open-file limit (ulimit -n) is " + std::to_string(files.rlim_cur));
  return allowed;
}

void check_timeout(double ms, const char* flag) {
  if (!std::isfinite(ms) || ms < 1 || ms > kMaxTimeoutMs)
    throw UsageError(std::string("serve: ") + flag + " must be between 1 and " + std::to_string(kMaxTimeoutMs) + " ms");
}

}  // namespace

struct HttpFrontend::Impl {
  FrontendOptions options;
  MicroBatcher& batcher;
  ServeMetrics& metrics;
  Preprocessor preprocess;
  std::vector<std::string> class_names;
  DeadlineServer server;
  std::thread listener;
  std::atomic<bool> listener_done{false};
  std::atomic<bool> ready{false};
  std::atomic<bool> draining{false};
  std::atomic<int> active{0};     // classify handlers running
  std::atomic<int> admitting{0};  // classify handlers admitted but not yet queued
  fs::path root;
  DecodeBudget decode_budget;

  Impl(FrontendOptions o, MicroBatcher& b, ServeMetrics& m, Preprocessor p, std::vector<std::string> names)
      : options(std::move(o)),
        batcher(b),
        metrics(m),
        preprocess(std::move(p)),
        class_names(std::move(names)),
        server(read_deadlines(options), static_cast<std::size_t>(std::max(1, options.http_threads)),
               waiting_connections_allowed(options), options.max_body_bytes),
        decode_budget(to_ms(options.request_timeout_ms)) {}

  // Seconds a rejected client should wait: the queue's drain time at the recent rate, at least 1.
  int retry_after_s() const {
    const double rate = metrics.images_per_second(std::chrono::steady_clock::now());
    const double queued = static_cast<double>(batcher.queue_length());
    return std::max(1, static_cast<int>(std::ceil(rate > 0 ? queued / rate : 1.0)));
  }

  void reply_too_large(httplib::Response& res) const {
    reply_error(
        res, 413,
        "the body is larger than the limit of " + std::to_string(options.max_body_bytes) + " bytes (--max-body-bytes)");
  }

  // The body, de-chunked (and decompressed), up to --max-body-bytes: cpp-httplib 0.11 checks its
  // payload limit against Content-Length only, so a chunked body or one without a length would
  // otherwise grow without bound. False when an error answer is set (the connection then closes:
  // what is left of the body is never read).
  bool read_body(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader,
                 std::string& body) {
    if (req.is_multipart_form_data()) {
      DeadlineServer::close_after_response();
      res.set_header("Connection", "close");
      return refuse(res, 415, "multipart bodies are not accepted: send the image bytes as the body");
    }
    const std::size_t limit = options.max_body_bytes;
    bool over = req.has_header("Content-Length") &&
                std::strtoull(req.get_header_value("Content-Length").c_str(), nullptr, 10) > limit;
    const bool complete = !over && reader([&](const char* data, std::size_t n) {
      over = body.size() + n > limit;
      if (!over) body.append(data, n);
      return !over;
    });
    if (complete) return true;
    answer_unread_body(res, over);
    return false;
  }

  // Why the body was not read to its end; the rest of it stays unread, so the connection closes.
  void answer_unread_body(httplib::Response& res, bool over_limit) {
    DeadlineServer::close_after_response();
    res.set_header("Connection", "close");
    if (over_limit || res.status == 413)
      reply_too_large(res);
    else if (draining)
      reply_error(res, 503, "the server is shutting down");
    else if (DeadlineServer::deadline_passed())
      reply_error(res, 408,
                  "the body did not arrive within " + std::to_string(to_ms(options.body_timeout_ms).count()) +
                      " ms (--body-timeout-ms)");
    else if (res.status == 415)
      reply_error(res, 415, "unsupported Content-Encoding");
    else if (const std::string fault = DeadlineServer::body_fault(); !fault.empty())
      reply_error(res, 400, "malformed chunked body: " + fault);
    else
      reply_error(res, 400, "the body could not be read (malformed chunked encoding, or the connection broke)");
  }

  // A JSON {"path": ...} request: the file's bytes into `bytes`, or false with an error answer set.
  bool read_path_request(const std::string& body, std::vector<std::uint8_t>& bytes, httplib::Response& res) {
    if (body.size() > kMaxJsonBodyBytes)
      return refuse(res, 413, "a JSON request is larger than " + std::to_string(kMaxJsonBodyBytes) + " bytes");
    if (json_nesting_exceeds(body))
      return refuse(res, 400, "JSON nested deeper than " + std::to_string(kMaxJsonNesting) + " levels");
    json parsed;
    try {
      parsed = json::parse(body);
    } catch (const json::parse_error& e) {
      return refuse(res, 400, std::string("malformed JSON: ") + e.what());
    }
    if (!parsed.is_object() || !parsed.contains("path") || !parsed["path"].is_string())
      return refuse(res, 400, "expected a JSON object {\"path\": \"<image file under the image root>\"}");
    if (root.empty()) return refuse(res, 403, "path requests are disabled: start the server with --image-root");
    RootFile file;
    try {
      file = read_under_root(root, parsed["path"].get<std::string>(), options.max_body_bytes);
    } catch (const UsageError& e) {
      return refuse(res, 400, e.what());
    }
    if (file.outcome == RootFile::Outcome::kTooLarge)
      return refuse(res, 413,
                    "the file is larger than the limit of " + std::to_string(options.max_body_bytes) +
                        " bytes (--max-body-bytes)");
    if (file.outcome == RootFile::Outcome::kMiss) return refuse(res, 404, kNoSuchImage);
    bytes = std::move(file.bytes);
    return true;
  }

  void classify(const httplib::Request& req, const std::string& body, httplib::Response& res) {
    const auto t0 = std::chrono::steady_clock::now();
    struct Active {
      std::atomic<int>& n;
      explicit Active(std::atomic<int>& a) : n(a) { ++n; }
      ~Active() { --n; }
    } active_guard(active);

    // Admission: counted before the draining check (both sequentially consistent), so a drain
    // either sees this request coming and waits for it to reach the queue, or it sees the drain.
    struct Admitting {
      std::atomic<int>& n;
      bool done = false;
      explicit Admitting(std::atomic<int>& a) : n(a) { ++n; }
      void finish() {
        if (!done) --n;
        done = true;
      }
      ~Admitting() { finish(); }
    } admitting_guard(admitting);
    if (draining) {
      res.set_header("Connection", "close");
      return reply_error(res, 503, "the server is shutting down");
    }
    if (!ready) {
      res.set_header("Retry-After", "1");
      return reply_error(res, 503, "warming up; see /readyz");
    }

    std::vector<std::uint8_t> file_bytes;
    const std::uint8_t* data = reinterpret_cast<const std::uint8_t*>(body.data());
    std::size_t size = body.size();
    if (looks_like_json(req, body)) {
      if (!read_path_request(body, file_bytes, res)) return;
      data = file_bytes.data();
      size = file_bytes.size();
    }
    if (size == 0) return reply_error(res, 400, "empty body: send image bytes or JSON {\"path\": ...}");
    if (sniff_format(data, size) == ImageFormat::kUnknown)
      return reply_error(res, 415,
                         "the body is not an image (JPEG, PNG, BMP, WebP, TIFF or GIF bytes expected, "
                         "or JSON {\"path\": ...})");

    std::vector<float> input;
    const auto tp = std::chrono::steady_clock::now();
    try {
      DecodeBudget::Reservation pixels(decode_budget);  // given back once the image is preprocessed
      input = preprocess(data, size, [&pixels](std::uint64_t bytes) { pixels.add(bytes); });
    } catch (const DecodeBudgetBusy& e) {
      res.set_header("Retry-After", std::to_string(retry_after_s()));
      return reply_error(res, 503, std::string(e.what()) + "; retry later");
    } catch (const std::exception& e) {
      return reply_error(res, 422, std::string("cannot decode the image: ") + e.what());
    }
    metrics.observe(Stage::kPreprocess, ms_between(tp, std::chrono::steady_clock::now()));

    auto request = batcher.submit(std::move(input));
    admitting_guard.finish();
    answer(*request, t0, res);
  }

  // Waits for the batcher's verdict on `request` and writes it.
  void answer(InferenceRequest& request, std::chrono::steady_clock::time_point t0, httplib::Response& res) {
    // The batcher answers every request by its timeout; the margin covers a batch still running.
    const auto wait = std::chrono::milliseconds(static_cast<long>(options.request_timeout_ms) + 60000);
    request.wait_for(wait);
    switch (request.status()) {
      case RequestStatus::kRejected:
        res.set_header("Retry-After", std::to_string(retry_after_s()));
        return reply_error(res, 503, request.error + "; retry later");
      case RequestStatus::kTimedOut:
        return reply_error(res, 504, request.error);
      case RequestStatus::kFailed:
        return reply_error(res, 500, request.error);
      case RequestStatus::kPending:
        return reply_error(res, 504, "no answer from the model in time");
      case RequestStatus::kDone:
        break;
    }
    const auto& probs = request.output;
    std::size_t best = 0;
    for (std::size_t i = 1; i < probs.size(); ++i)
      if (probs[i] > probs[best]) best = i;
    json out;
    out["label"] = best < class_names.size() ? class_names[best] : std::to_string(best);
    out["label_index"] = best;
    out["confidence"] = probs.empty() ? 0.0f : probs[best];
    json p = json::object();
    for (std::size_t i = 0; i < probs.size(); ++i)
      p[i < class_names.size() ? class_names[i] : std::to_string(i)] = probs[i];
    out["probabilities"] = std::move(p);
    out["batch_size"] = request.batch_size;
    const double total = ms_between(t0, std::chrono::steady_clock::now());
    out["timings_ms"] = {{"queue_wait", request.queue_wait_ms},
                         {"host_to_device", request.h2d_ms},
                         {"compute", request.compute_ms},
                         {"total", total}};
    metrics.observe(Stage::kTotal, total);
    reply_json(res, 200, out);
  }

  // Runs once the headers are in, before any body is read: only POST /v1/classify reads a body (it
  // has the limit); any other request that carries one is answered unread and its connection closed
  // (a GET with a body too: httplib would not read it, and its bytes would be taken for a request).
  httplib::Server::HandlerResponse before_routing(const httplib::Request& req, httplib::Response& res) {
    DeadlineServer::headers_received();
    if (req.method == "POST" && req.path == "/v1/classify") return httplib::Server::HandlerResponse::Unhandled;
    const bool with_body = declares_a_body(req);
    if (!with_body && !reads_a_body(req.method)) return httplib::Server::HandlerResponse::Unhandled;
    DeadlineServer::close_after_response();
    res.set_header("Connection", "close");
    const bool known =
        req.path == "/v1/classify" || req.path == "/healthz" || req.path == "/readyz" || req.path == "/metrics";
    if (!known) {
      res.status = 404;  // the error handler writes the body
    } else if (reads_a_body(req.method)) {
      res.status = 405;
    } else {
      reply_error(res, 400, req.method + " " + req.path + " takes no body");
    }
    return httplib::Server::HandlerResponse::Handled;
  }

  // httplib's own refusals (404, 405, 400, 414) come without a body: give them one. A request it
  // could not parse (400, 408, 414) closes its connection: what follows is not read as a request.
  httplib::Server::HandlerResponse on_error(const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    if (res.status == 400 && DeadlineServer::deadline_passed()) res.status = 408;
    if (res.status == 400 || res.status == 408 || res.status == 414) {
      DeadlineServer::close_after_response();
      res.set_header("Connection", "close");
    }
    std::string message = "HTTP " + std::to_string(res.status);
    if (res.status == 408)
      message = "the request headers did not arrive within " +
                std::to_string(to_ms(options.header_timeout_ms).count()) + " ms (--header-timeout-ms)";
    else if (res.status == 404)
      message = "no route " + req.method + " " + req.path + " (POST /v1/classify, GET /healthz /readyz /metrics)";
    else if (res.status == 405)
      message = "method " + req.method + " not allowed on " + req.path;
    reply_error(res, res.status, message);
    return httplib::Server::HandlerResponse::Handled;
  }

  std::string connection_metrics() const {
    return "# HELP shoplens_serve_connections_waiting Connections waiting for a request's headers (no thread each).\n"
           "# TYPE shoplens_serve_connections_waiting gauge\n"
           "shoplens_serve_connections_waiting " +
           std::to_string(server.connections_waiting()) +
           "\n"
           "# HELP shoplens_serve_connections_evicted_total Waiting connections closed to make room for newer ones.\n"
           "# TYPE shoplens_serve_connections_evicted_total counter\n"
           "shoplens_serve_connections_evicted_total " +
           std::to_string(server.connections_evicted()) +
           "\n"
           "# HELP shoplens_serve_decode_budget_bytes Bytes of decoded pixels requests may hold at once.\n"
           "# TYPE shoplens_serve_decode_budget_bytes gauge\n"
           "shoplens_serve_decode_budget_bytes " +
           std::to_string(decode_budget.capacity()) +
           "\n"
           "# HELP shoplens_serve_decode_bytes_in_use Bytes of decoded pixels held by requests now.\n"
           "# TYPE shoplens_serve_decode_bytes_in_use gauge\n"
           "shoplens_serve_decode_bytes_in_use " +
           std::to_string(decode_budget.in_use()) + "\n";
  }

  void install_routes() {
    const httplib::Server::HandlerWithContentReader classify_route =
        [this](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
          std::string body;
          if (read_body(req, res, reader, body)) classify(req, body, res);
        };
    server.Post("/v1/classify", classify_route);
    server.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
      reply_json(res, 200, json{{"status", "ok"}});
    });
    server.Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
      if (ready && !draining) return reply_json(res, 200, json{{"ready", true}});
      reply_json(res, 503, json{{"ready", false}, {"reason", draining ? "draining" : "warming up"}});
    });
    server.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics.prometheus(std::chrono::steady_clock::now()) + connection_metrics(),
                      "text/plain; version=0.0.4");
    });
    server.set_pre_routing_handler(
        [this](const httplib::Request& req, httplib::Response& res) { return before_routing(req, res); });
    const httplib::Server::HandlerWithResponse error_route =
        [this](const httplib::Request& req, httplib::Response& res) { return on_error(req, res); };
    server.set_error_handler(error_route);
    server.set_exception_handler([](const httplib::Request&, httplib::Response& res, const std::exception_ptr& ep) {
      std::string what = "internal error";
      try {
        if (ep) std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {}
      reply_error(res, 500, what);
    });
    server.set_logger(
        [this](const httplib::Request&, const httplib::Response& res) { metrics.count_response(res.status); });
    server.set_early_answer([this](int status, const std::string& why) {
      metrics.count_response(status);
      return error_json(status, why);
    });
  }
};

HttpFrontend::HttpFrontend(FrontendOptions options, MicroBatcher& batcher, ServeMetrics& metrics,
                           Preprocessor preprocess, std::vector<std::string> class_names) {
  check_timeout(options.header_timeout_ms, "--header-timeout-ms");
  check_timeout(options.body_timeout_ms, "--body-timeout-ms");
  check_timeout(options.idle_timeout_ms, "--idle-timeout-ms");
  impl_ = std::make_unique<Impl>(std::move(options), batcher, metrics, std::move(preprocess), std::move(class_names));
  if (!impl_->options.image_root.empty()) {
    std::error_code ec;
    if (!fs::is_directory(impl_->options.image_root, ec))
      throw UsageError("serve: --image-root " + impl_->options.image_root.string() + " is not a folder");
    impl_->root = fs::canonical(impl_->options.image_root);
  }
}

HttpFrontend::~HttpFrontend() { stop(); }

int HttpFrontend::start() {
  auto& s = impl_->server;
  s.set_payload_max_length(impl_->options.max_body_bytes);
  // Advertised in Keep-Alive: timeout=N (whole seconds); the idle deadline itself is exact.
  s.set_keep_alive_timeout(static_cast<time_t>(std::ceil(impl_->options.idle_timeout_ms / 1000.0)));
  impl_->install_routes();
  int port = impl_->options.port;
  if (port == 0) {
    port = s.bind_to_any_port(impl_->options.host);
  } else if (!s.bind_to_port(impl_->options.host, port)) {
    port = -1;
  }
  if (port < 0)
    throw IoError("serve: cannot listen on " + impl_->options.host + ":" + std::to_string(impl_->options.port));
  s.widen_listen_backlog();
  impl_->listener = std::thread([this] {
    impl_->server.listen_after_bind();
    impl_->listener_done = true;
  });
  return port;
}

void HttpFrontend::set_ready(bool ready) {
  impl_->ready = ready;
  impl_->metrics.set_ready(ready && !impl_->draining);
}

void HttpFrontend::set_decode_budget(std::uint64_t bytes) { impl_->decode_budget.set_capacity(bytes); }

void HttpFrontend::begin_drain() {
  impl_->draining = true;
  impl_->metrics.set_ready(false);
  // Connections still waiting for or sending a request end within the grace: a slow client cannot
  // hold the drain (nor the pool's threads, which stop() joins).
  impl_->server.begin_drain(kDrainGrace);
  // Requests already admitted finish preprocessing and reach the queue before it is drained.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (impl_->admitting.load() > 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

bool HttpFrontend::wait_idle(double timeout_s) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                            std::chrono::duration<double>(timeout_s));
  while (impl_->active.load() > 0) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

void HttpFrontend::stop() {
  if (!impl_) return;
  impl_->server.begin_drain(std::chrono::milliseconds(0));  // no read outlives the stop
  if (!impl_->listener.joinable()) return;
  // httplib's stop() does nothing until the listener thread has marked the server running: a stop
  // that came first would leave the accept loop running and the join waiting on it forever.
  while (!impl_->listener_done && !impl_->server.is_running())
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  if (impl_->server.is_running()) impl_->server.stop();
  impl_->listener.join();
}

}  // namespace shoplens::serve
