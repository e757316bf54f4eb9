// cpp-httplib is compiled with the flags Debian's libcpp-httplib was built with (src/CMakeLists.txt
// sets them on the files that include it): its classes' layout depends on them.
#include "shoplens/serve/http_frontend.h"

#include <httplib.h>

#include <atomic>
#include <cmath>
#include <thread>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/data/image_io.h"

namespace shoplens::serve {
namespace fs = std::filesystem;
using json = nlohmann::json;

fs::path resolve_under_root(const fs::path& root, const std::string& requested) {
  if (requested.empty()) throw UsageError("\"path\" is empty");
  if (requested.find('\0') != std::string::npos) throw UsageError("\"path\" contains a NUL byte");
  std::error_code ec;
  const fs::path base = fs::weakly_canonical(root, ec);
  if (ec) throw UsageError("the image root cannot be resolved: " + ec.message());
  const fs::path p(requested);
  // weakly_canonical resolves "..", "." and symbolic links: a link out of the root is refused too.
  const fs::path resolved = fs::weakly_canonical(p.is_absolute() ? p : base / p, ec);
  if (ec) throw UsageError("\"path\" cannot be resolved: " + ec.message());
  auto b = base.begin(), r = resolved.begin();
  for (; b != base.end() && !b->empty(); ++b, ++r)
    if (r == resolved.end() || *r != *b) throw UsageError("\"path\" is outside the image root");
  return resolved;
}

namespace {

void reply_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}
void reply_error(httplib::Response& res, int status, const std::string& message) {
  reply_json(res, status, json{{"error", message}, {"status", status}});
}

bool looks_like_json(const httplib::Request& req) {
  if (req.get_header_value("Content-Type").find("json") != std::string::npos) return true;
  for (char c : req.body) {
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    return c == '{' || c == '[';
  }
  return false;
}

}  // namespace

struct HttpFrontend::Impl {
  FrontendOptions options;
  MicroBatcher& batcher;
  ServeMetrics& metrics;
  Preprocessor preprocess;
  std::vector<std::string> class_names;
  httplib::Server server;
  std::thread listener;
  std::atomic<bool> ready{false};
  std::atomic<bool> draining{false};
  std::atomic<int> active{0};     // classify handlers running
  std::atomic<int> admitting{0};  // classify handlers admitted but not yet queued
  fs::path root;

  Impl(FrontendOptions o, MicroBatcher& b, ServeMetrics& m, Preprocessor p, std::vector<std::string> names)
      : options(std::move(o)), batcher(b), metrics(m), preprocess(std::move(p)), class_names(std::move(names)) {}

  // Seconds a rejected client should wait: the queue's drain time at the recent rate, at least 1.
  int retry_after_s() const {
    const double rate = metrics.images_per_second(std::chrono::steady_clock::now());
    const double queued = static_cast<double>(batcher.queue_length());
    return std::max(1, static_cast<int>(std::ceil(rate > 0 ? queued / rate : 1.0)));
  }

  void classify(const httplib::Request& req, httplib::Response& res) {
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
    const std::uint8_t* data = reinterpret_cast<const std::uint8_t*>(req.body.data());
    std::size_t size = req.body.size();
    if (looks_like_json(req)) {
      json body;
      try {
        body = json::parse(req.body);
      } catch (const json::parse_error& e) {
        return reply_error(res, 400, std::string("malformed JSON: ") + e.what());
      }
      if (!body.is_object() || !body.contains("path") || !body["path"].is_string())
        return reply_error(res, 400, "expected a JSON object {\"path\": \"<image file under the image root>\"}");
      if (root.empty())
        return reply_error(res, 403, "path requests are disabled: start the server with --image-root");
      const std::string requested = body["path"].get<std::string>();
      fs::path file;
      try {
        file = resolve_under_root(root, requested);
      } catch (const UsageError& e) {
        return reply_error(res, 403, std::string(e.what()) + ": " + requested);
      }
      std::error_code ec;
      if (!fs::is_regular_file(file, ec)) return reply_error(res, 404, "no such image file under the image root: " + requested);
      try {
        file_bytes = read_binary_file(file);
      } catch (const std::exception& e) {
        return reply_error(res, 404, "cannot read " + requested + ": " + e.what());
      }
      data = file_bytes.data();
      size = file_bytes.size();
    }
    if (size == 0) return reply_error(res, 400, "empty body: send image bytes or JSON {\"path\": ...}");
    if (sniff_format(data, size) == ImageFormat::kUnknown)
      return reply_error(res, 415, "the body is not an image (JPEG, PNG, BMP, WebP, TIFF or GIF bytes expected, "
                                   "or JSON {\"path\": ...})");

    std::vector<float> input;
    const auto tp = std::chrono::steady_clock::now();
    try {
      input = preprocess(data, size);
    } catch (const std::exception& e) {
      return reply_error(res, 422, std::string("cannot decode the image: ") + e.what());
    }
    metrics.observe(Stage::kPreprocess, ms_between(tp, std::chrono::steady_clock::now()));

    auto request = batcher.submit(std::move(input));
    admitting_guard.finish();
    // The batcher answers every request by its timeout; the margin covers a batch still running.
    const auto wait = std::chrono::milliseconds(static_cast<long>(options.request_timeout_ms) + 60000);
    request->wait_for(wait);
    switch (request->status()) {
      case RequestStatus::kRejected:
        res.set_header("Retry-After", std::to_string(retry_after_s()));
        return reply_error(res, 503, request->error + "; retry later");
      case RequestStatus::kTimedOut:
        return reply_error(res, 504, request->error);
      case RequestStatus::kFailed:
        return reply_error(res, 500, request->error);
      case RequestStatus::kPending:
        return reply_error(res, 504, "no answer from the model in time");
      case RequestStatus::kDone:
        break;
    }
    const auto& probs = request->output;
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
    out["batch_size"] = request->batch_size;
    const double total = ms_between(t0, std::chrono::steady_clock::now());
    out["timings_ms"] = {{"queue_wait", request->queue_wait_ms}, {"host_to_device", request->h2d_ms},
                         {"compute", request->compute_ms}, {"total", total}};
    metrics.observe(Stage::kTotal, total);
    reply_json(res, 200, out);
  }

  void install_routes() {
    server.Post("/v1/classify", [this](const httplib::Request& req, httplib::Response& res) { classify(req, res); });
    server.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
      reply_json(res, 200, json{{"status", "ok"}});
    });
    server.Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
      if (ready && !draining) return reply_json(res, 200, json{{"ready", true}});
      reply_json(res, 503, json{{"ready", false}, {"reason", draining ? "draining" : "warming up"}});
    });
    server.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics.prometheus(std::chrono::steady_clock::now()), "text/plain; version=0.0.4");
    });
    // httplib's own refusals (413 over the body limit, 404, 405, 400) come without a body: give them one.
    httplib::Server::HandlerWithResponse on_error = [this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
      std::string message = "HTTP " + std::to_string(res.status);
      if (res.status == 413)
        message = "the body is larger than the limit of " + std::to_string(options.max_body_bytes) +
                  " bytes (--max-body-bytes)";
      else if (res.status == 404)
        message = "no route " + req.method + " " + req.path + " (POST /v1/classify, GET /healthz /readyz /metrics)";
      else if (res.status == 405)
        message = "method not allowed";
      reply_error(res, res.status, message);
      return httplib::Server::HandlerResponse::Handled;
    };
    server.set_error_handler(on_error);
    server.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "internal error";
      try {
        if (ep) std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      reply_error(res, 500, what);
    });
    server.set_logger([this](const httplib::Request&, const httplib::Response& res) { metrics.count_response(res.status); });
  }
};

HttpFrontend::HttpFrontend(FrontendOptions options, MicroBatcher& batcher, ServeMetrics& metrics, Preprocessor preprocess,
                           std::vector<std::string> class_names)
    : impl_(std::make_unique<Impl>(std::move(options), batcher, metrics, std::move(preprocess), std::move(class_names))) {
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
  const int threads = std::max(1, impl_->options.http_threads);
  s.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<std::size_t>(threads)); };
  s.set_payload_max_length(impl_->options.max_body_bytes);
  s.set_read_timeout(10, 0);
  impl_->install_routes();
  int port = impl_->options.port;
  if (port == 0) {
    port = s.bind_to_any_port(impl_->options.host);
  } else if (!s.bind_to_port(impl_->options.host, port)) {
    port = -1;
  }
  if (port < 0)
    throw IoError("serve: cannot listen on " + impl_->options.host + ":" + std::to_string(impl_->options.port));
  impl_->listener = std::thread([this] { impl_->server.listen_after_bind(); });
  return port;
}

void HttpFrontend::set_ready(bool ready) {
  impl_->ready = ready;
  impl_->metrics.set_ready(ready && !impl_->draining);
}

void HttpFrontend::begin_drain() {
  impl_->draining = true;
  impl_->metrics.set_ready(false);
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
  if (impl_->server.is_running()) impl_->server.stop();
  if (impl_->listener.joinable()) impl_->listener.join();
}

}  // namespace shoplens::serve
