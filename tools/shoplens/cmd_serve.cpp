// `shoplens serve`: online scoring over HTTP with a deadline-aware micro-batcher (docs/SERVING.md).
#include <cmath>
#include <string>

#include "command.h"
#include "shoplens/core/logging.h"
#include "shoplens/core/runtime.h"
#include "shoplens/serve/http_frontend.h"
#include "shoplens/serve/server.h"

namespace shoplens::cli {
namespace {

// A number of milliseconds in [lo, hi]. NaN, infinities and trailing junk are refused too
// (CLI::Range lets NaN through: every comparison with it is false).
CLI::Validator milliseconds_between(double lo, double hi) {
  const std::string range = "a number of milliseconds between " + std::to_string(static_cast<long long>(lo)) + " and " +
                            std::to_string(static_cast<long long>(hi));
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        std::size_t used = 0;
        double value = NAN;
        try {
          value = std::stod(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != text.size() || !std::isfinite(value) || value < lo || value > hi)
          return "must be " + range + ", not '" + text + "'";
        return "";
      },
      "MS in [" + std::to_string(static_cast<long long>(lo)) + ", " + std::to_string(static_cast<long long>(hi)) + "]");
}

class ServeCommand : public Command {
 public:
  void setup(CLI::App& app) override {
    app.add_option("-m,--model", o_.model_dir, "model folder written by `shoplens export`")->required();
    app.add_option("--variant", o_.variant, "weights file to load: fp32, bf16 or fp16");
    app.add_option("--device", o_.device, "auto, cpu or cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
    app.add_option("--host", o_.host, "address to listen on (loopback by default; anything else is reachable by others)");
    app.add_option("-p,--port", o_.port, "TCP port (0: any free port; see --port-file)")->check(CLI::Range(0, 65535));
    app.add_option("--port-file", o_.port_file, "write the bound port to this file once listening (empty: none)");
    app.add_option("--image-root", o_.image_root,
                   "folder that JSON {\"path\": ...} requests may read from (empty: path requests refused)");
    app.add_option("--max-batch", o_.max_batch, "largest micro-batch")->check(CLI::PositiveNumber);
    app.add_option("--max-queue-delay-ms", o_.max_queue_delay_ms,
                   "longest a request waits for company before its batch runs (without --p95-target-ms)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--max-queue", o_.max_queue, "requests waiting at most; more are refused at once with 503")
        ->check(CLI::PositiveNumber);
    app.add_option("--p95-target-ms", o_.p95_target_ms,
                   "latency target: choose batch and wait from the measured batch->latency curve (0: off)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--request-timeout-ms", o_.request_timeout_ms, "a request still queued after this gets 504")
        ->check(CLI::PositiveNumber);
    app.add_option("--max-body-bytes", o_.max_body_bytes, "largest request body; larger ones get 413")
        ->check(CLI::PositiveNumber);
    app.add_option("--header-timeout-ms", o_.header_timeout_ms,
                   "a request's headers must arrive within this from its first byte, else 408 and the connection closes")
        ->check(milliseconds_between(1, serve::kMaxTimeoutMs));
    app.add_option("--body-timeout-ms", o_.body_timeout_ms,
                   "a request's body must arrive within this from the end of its headers, else 408 and the connection closes")
        ->check(milliseconds_between(1, serve::kMaxTimeoutMs));
    app.add_option("--idle-timeout-ms", o_.idle_timeout_ms,
                   "a kept-alive connection with no new request for this long is closed")
        ->check(milliseconds_between(1, serve::kMaxTimeoutMs));
    app.add_option("--http-threads", o_.http_threads,
                   "connections served at once (0: --max-queue + 2 x --max-batch + 8, so a full queue answers 503)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--warmup-reps", o_.warmup_reps, "timed passes per batch size when measuring the latency curve")
        ->check(CLI::PositiveNumber);
    app.add_option("--threads", threads_, "compute threads (0: usable cores)")->check(CLI::NonNegativeNumber);
    app.add_option("--log-level", log_level_, "trace, debug, info, warn or error");
  }

  int run() override {
    set_log_level(log_level_);
    set_compute_threads(threads_);
    return serve::run_server(o_);
  }

 private:
  serve::ServeOptions o_;
  int threads_ = 0;
  std::string log_level_ = "info";
};

}  // namespace

std::unique_ptr<Command> make_serve_command() { return std::make_unique<ServeCommand>(); }

}  // namespace shoplens::cli
