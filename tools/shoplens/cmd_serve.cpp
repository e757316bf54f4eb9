// `shoplens serve`: online scoring over HTTP with a deadline-aware micro-batcher (docs/SERVING.md).
#include <string>

#include "command.h"
#include "inference_flags.h"
#include "shoplens/core/logging.h"
#include "shoplens/core/runtime.h"
#include "shoplens/infer/latency_curve.h"
#include "shoplens/serve/http_frontend.h"
#include "shoplens/serve/server.h"

namespace shoplens::cli {
namespace {

std::string whole(double value) { return std::to_string(static_cast<long long>(value)); }

class ServeCommand : public Command {
 public:
  void setup(CLI::App& app) override {
    add_exported_model_flags(app, weights_, model_);
    app.add_option("--variant", o_.variant, "weights file to load: fp32, bf16 or fp16");
    compute_.add_to(app);
    app.add_flag_callback(
        "--fast-decode", [this] { o_.inference.exact_decode = false; },
        "decode JPEGs with the fast DCT at reduced scale (faster; pixels differ slightly from torchvision's)");
    app.add_option("--host", o_.frontend.host,
                   "address to listen on (loopback by default; anything else is reachable by others)");
    app.add_option("-p,--port", o_.frontend.port, "TCP port, 0 to 65535 (0: any free port; see --port-file)")
        ->check(finite_between(0, 65535));
    app.add_option("--port-file", o_.port_file, "write the bound port to this file once listening (empty: none)");
    app.add_option("--image-root", o_.frontend.image_root,
                   "folder that JSON {\"path\": ...} requests may read from (empty: path requests refused)");
    app.add_option("--max-batch", o_.batcher.max_batch,
                   "largest micro-batch, 1 to " + std::to_string(kMaxLatencyCurveBatch))
        ->check(finite_between(1, kMaxLatencyCurveBatch));
    app.add_option("--max-queue-delay-ms", o_.batcher.max_queue_delay_ms,
                   "longest a request waits for company before its batch runs (without --p95-target-ms), 0 to " +
                       whole(serve::kMaxTimeoutMs))
        ->check(finite_between(0, serve::kMaxTimeoutMs));
    app.add_option("--max-queue", o_.batcher.max_queue,
                   "requests waiting at most, 1 to " + std::to_string(serve::kMaxQueueLength) +
                       "; more are refused at once with 503")
        ->check(finite_between(1, serve::kMaxQueueLength));
    app.add_option("--p95-target-ms", o_.batcher.p95_target_ms,
                   "latency target: choose batch and wait from the measured batch->latency curve (0: off; at most " +
                       whole(serve::kMaxTimeoutMs) + ")")
        ->check(finite_between(0, serve::kMaxTimeoutMs));
    app.add_option("--request-timeout-ms", o_.batcher.timeout_ms,
                   "a request still queued after this gets 504, 1 to " + whole(serve::kMaxTimeoutMs))
        ->check(finite_between(1, serve::kMaxTimeoutMs));
    app.add_option("--max-body-bytes", o_.frontend.max_body_bytes,
                   "largest request body, at most " + std::to_string(serve::kMaxBodyBytes) + "; larger ones get 413")
        ->check(finite_between(1, static_cast<double>(serve::kMaxBodyBytes)));
    app.add_option("--decode-budget-mb", o_.decode_budget_mb,
                   "decoded pixels requests may hold at once, in MB (0: half the warmed-up server's peak memory); a "
                   "larger image gets 422, one that finds no room 503")
        ->check(finite_between(0, static_cast<double>(serve::kMaxDecodeBudgetMb)));
    app.add_option(
           "--header-timeout-ms", o_.frontend.header_timeout_ms,
           "a request's headers must arrive within this from its first byte, else 408 and the connection closes (1 "
           "to " +
               whole(serve::kMaxTimeoutMs) + ")")
        ->check(finite_between(1, serve::kMaxTimeoutMs));
    app.add_option(
           "--body-timeout-ms", o_.frontend.body_timeout_ms,
           "a request's body must arrive within this from the end of its headers, else 408 and the connection closes "
           "(1 to " +
               whole(serve::kMaxTimeoutMs) + ")")
        ->check(finite_between(1, serve::kMaxTimeoutMs));
    app.add_option("--idle-timeout-ms", o_.frontend.idle_timeout_ms,
                   "a kept-alive connection with no new request for this long is closed (1 to " +
                       whole(serve::kMaxTimeoutMs) + ")")
        ->check(finite_between(1, serve::kMaxTimeoutMs));
    app.add_option("--http-threads", o_.frontend.http_threads,
                   "connections served at once, 0 to " + std::to_string(kMaxThreads) +
                       " (0: --max-queue + 2 x --max-batch + 8, so a full queue answers 503)")
        ->check(thread_count());
    app.add_option("--max-waiting-connections", o_.frontend.max_waiting_connections,
                   "connections waiting for their request's headers (no thread each), 1 to 1000000; beyond it the "
                   "longest waiter is closed")
        ->check(finite_between(1, 1000000));
    app.add_option(
           "--warmup-reps", o_.warmup_reps,
           "timed passes per batch size when measuring the latency curve, 1 to " + std::to_string(kMaxLatencyCurveReps))
        ->check(finite_between(1, kMaxLatencyCurveReps));
    app.add_option("--threads", threads_, "compute threads, 0 to " + std::to_string(kMaxThreads) + " (0: usable cores)")
        ->check(thread_count());
    app.add_option("--log-level", log_level_, "trace, debug, info, warn or error");
  }

  int run() override {
    set_log_level(log_level_);
    set_compute_threads(threads_);
    compute_.apply(o_.inference.precision, o_.inference.device);
    o_.model_dir = exported_model_folder("serve", weights_, model_);
    return serve::run_server(o_);
  }

 private:
  serve::ServeOptions o_;
  ComputeFlags compute_;
  std::filesystem::path weights_;
  std::string model_;
  int threads_ = 0;
  std::string log_level_ = "info";
};

}  // namespace

std::unique_ptr<Command> make_serve_command() { return std::make_unique<ServeCommand>(); }

}  // namespace shoplens::cli
