#include "shoplens/serve/server.h"

#include <torch/torch.h>

#include <csignal>
#include <cstring>
#include <iostream>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/interrupt.h"
#include "shoplens/core/plural.h"
#include "shoplens/core/process_memory.h"
#include "shoplens/core/runtime.h"
#include "shoplens/core/stats.h"
#include "shoplens/data/image_io.h"
#include "shoplens/infer/inference_session.h"
#include "shoplens/infer/model_export.h"
#include "shoplens/serve/http_frontend.h"
#include "shoplens/serve/micro_batcher.h"
#include "shoplens/serve/serve_metrics.h"

namespace shoplens::serve {
namespace {

using Clock = std::chrono::steady_clock;

// The serving side of the inference core: request bytes -> preprocessed floats on HTTP threads,
// batches of them -> probabilities on the batcher's thread, in the session's precision.
class ModelRunner {
 public:
  explicit ModelRunner(InferenceSession& session) : session_(session), decode_(session.decode_options()) {}

  // The same decode and evaluation transform as `shoplens score` on a manifest row; the decoder
  // reserves its pixels before allocating them (the frontend's decode budget).
  std::vector<float> preprocess(const std::uint8_t* data, std::size_t size, const PixelReservation& reserve) const {
    DecodeOptions options = decode_;
    options.before_allocating = reserve;
    const cv::Mat rgb = decode_image(data, size, options).rgb;
    std::vector<float> out(session_.floats_per_sample());
    session_.preprocess(rgb, out.data());
    return out;
  }

  BatchTiming run(const std::vector<const std::vector<float>*>& inputs, std::vector<std::vector<float>>& outputs) {
    BatchTiming timing;
    const auto t0 = Clock::now();
    const std::size_t floats = session_.floats_per_sample();
    auto images = session_.host_batch(static_cast<std::int64_t>(inputs.size()));
    float* dst = images.data_ptr<float>();
    for (std::size_t i = 0; i < inputs.size(); ++i)
      std::memcpy(dst + i * floats, inputs[i]->data(), floats * sizeof(float));
    const at::Tensor on_device = session_.to_device(images);
    timing.h2d_ms = ms_between(t0, Clock::now());
    const auto t1 = Clock::now();
    const at::Tensor probs = session_.run(on_device).probabilities;
    timing.compute_ms = ms_between(t1, Clock::now());
    const auto classes = static_cast<std::size_t>(probs.size(1));
    const float* p = probs.data_ptr<float>();
    for (std::size_t i = 0; i < inputs.size(); ++i) outputs[i].assign(p + i * classes, p + (i + 1) * classes);
    return timing;
  }

  // Warm-up doubles as the measurement of the batch -> latency curve the p95 mode plans with.
  LatencyCurve measure(int max_batch, int reps) {
    std::vector<std::vector<float>> inputs(max_batch, std::vector<float>(session_.floats_per_sample(), 0.1f));
    std::vector<const std::vector<float>*> ptrs;
    ptrs.reserve(inputs.size());
    for (auto& v : inputs) ptrs.push_back(&v);
    std::vector<std::vector<float>> outputs(max_batch);
    auto run_batch = [&](int b) {
      const std::vector<const std::vector<float>*> batch(ptrs.begin(), ptrs.begin() + b);
      run(batch, outputs);
    };
    auto log_point = [](const LatencyPoint& p) {
      spdlog::info("warm-up: batch {:>3}  p50 {:.2f} ms  p95 {:.2f} ms  {:.0f} images/s", p.batch, p.p50_ms, p.p95_ms,
                   p.batch * 1e3 / p.p50_ms);
    };
    return measure_latency_curve(run_batch, max_batch, reps, log_point, [] { return interrupt_requested(); });
  }

  const std::vector<std::string>& class_names() const { return session_.class_names(); }

 private:
  InferenceSession& session_;
  DecodeOptions decode_;
};

FrontendOptions frontend_options(const ServeOptions& o) {
  FrontendOptions fo = o.frontend;
  // Each request waiting for its batch holds an HTTP thread. With fewer threads than the queue can
  // hold, excess requests would wait unseen in the threads' own queue (latency, never a 503):
  // enough threads for a full queue, the batch running and a few quick requests (/metrics, /healthz).
  if (fo.http_threads <= 0) fo.http_threads = o.batcher.max_queue + 2 * o.batcher.max_batch + 8;
  fo.request_timeout_ms = o.batcher.timeout_ms;
  return fo;
}

// The bytes of decoded pixels in flight: --decode-budget-mb, or (0) half the peak resident memory
// of the server once warmed up, so that requests' images add at most that much to it.
std::uint64_t decode_budget_bytes(std::uint64_t budget_mb) {
  const bool automatic = budget_mb == 0;
  std::uint64_t bytes = budget_mb << 20;
  if (automatic) {
    const std::int64_t peak = read_resident_memory().peak;
    bytes = std::max<std::uint64_t>(peak > 0 ? static_cast<std::uint64_t>(peak) / 2 : kDecodeBudgetUnknownMemory,
                                    kDecodeBudgetAtLeast);
  }
  spdlog::info("decode budget: {} MB of pixels in flight{}", bytes >> 20,
               automatic ? " (half the ready server's peak memory; --decode-budget-mb)" : "");
  return bytes;
}

void check_options(const ServeOptions& o) {
  auto within = [](double value, double lo, double hi, const char* flag) {
    if (!(value >= lo && value <= hi))
      throw UsageError(fmt::format("serve: {} must be between {} and {}, got {}", flag, lo, hi, value));
  };
  within(o.batcher.max_batch, 1, kMaxLatencyCurveBatch, "--max-batch");
  within(o.batcher.max_queue, 1, kMaxQueueLength, "--max-queue");
  within(o.batcher.max_queue_delay_ms, 0, kMaxTimeoutMs, "--max-queue-delay-ms");
  within(o.batcher.p95_target_ms, 0, kMaxTimeoutMs, "--p95-target-ms");
  within(o.batcher.timeout_ms, 1, kMaxTimeoutMs, "--request-timeout-ms");
  within(static_cast<double>(o.frontend.max_body_bytes), 1, static_cast<double>(kMaxBodyBytes), "--max-body-bytes");
  within(o.warmup_reps, 1, kMaxLatencyCurveReps, "--warmup-reps");
  within(static_cast<double>(o.decode_budget_mb), 0, kMaxDecodeBudgetMb, "--decode-budget-mb");
}

}  // namespace

int run_server(const ServeOptions& o) {
  check_options(o);
  if (o.frontend.host != "127.0.0.1" && o.frontend.host != "localhost" && o.frontend.host != "::1")
    spdlog::warn("serve: listening on {} (not loopback): anyone who can reach it can use the model", o.frontend.host);
  // A client that hangs up mid-response must not kill the server: write errors become EPIPE.
  std::signal(SIGPIPE, SIG_IGN);

  InferenceSession session(load_exported_model(o.model_dir, o.variant, /*verify=*/true), o.inference);
  ModelRunner runner(session);
  ServeMetrics metrics(o.batcher.max_batch);
  MicroBatcher batcher(
      o.batcher, [&](const auto& inputs, auto& outputs) { return runner.run(inputs, outputs); }, steady_now, &metrics);
  metrics.set_queue_length_source([&] { return batcher.queue_length(); });

  HttpFrontend frontend(
      frontend_options(o), batcher, metrics,
      [&](const std::uint8_t* d, std::size_t n, const PixelReservation& reserve) {
        return runner.preprocess(d, n, reserve);
      },
      runner.class_names());
  const int port = frontend.start();
  if (!o.port_file.empty()) write_file_atomic(o.port_file, std::to_string(port) + "\n");
  std::cout << "listening on http://" << o.frontend.host << ":" << port << std::endl;

  // /healthz answers from here on; /readyz only once the curve is measured.
  const LatencyCurve curve = runner.measure(o.batcher.max_batch, o.warmup_reps);
  std::vector<std::pair<int, double>> curve_ms;
  for (const auto& p : curve.points()) curve_ms.emplace_back(p.batch, p.p95_ms);
  metrics.set_latency_curve(curve_ms);
  batcher.set_curve(curve);
  if (o.batcher.p95_target_ms > 0) {
    const int cap = curve.largest_within(o.batcher.p95_target_ms, o.batcher.max_batch);
    spdlog::info("p95 target {} ms: batches up to {} (model p95 {:.1f} ms at that size)", o.batcher.p95_target_ms, cap,
                 curve.p95_ms(cap));
    if (curve.p95_ms(1) > o.batcher.p95_target_ms)
      spdlog::warn("the model alone needs {:.1f} ms at batch 1: the p95 target of {} ms cannot be met", curve.p95_ms(1),
                   o.batcher.p95_target_ms);
  }
  batcher.start();
  frontend.set_decode_budget(decode_budget_bytes(o.decode_budget_mb));
  if (!interrupt_requested()) {
    frontend.set_ready(true);
    spdlog::info("ready: max batch {}, {}, queue {}, timeout {} ms", o.batcher.max_batch,
                 o.batcher.p95_target_ms > 0 ? fmt::format("p95 target {} ms", o.batcher.p95_target_ms)
                                             : fmt::format("queue delay {} ms", o.batcher.max_queue_delay_ms),
                 o.batcher.max_queue, o.batcher.timeout_ms);
  }

  while (!interrupt_requested()) std::this_thread::sleep_for(std::chrono::milliseconds(50));

  // Drain: refuse new work, answer what is queued, let the handlers write their responses.
  spdlog::info("signal received: draining ({} queued)", batcher.queue_length());
  frontend.begin_drain();
  batcher.drain_and_stop();
  if (!frontend.wait_idle(30.0)) spdlog::warn("drain: handlers still running after 30 s; stopping anyway");
  frontend.stop();
  spdlog::info("drained and stopped: {}, p50/p95/p99 total {:.1f}/{:.1f}/{:.1f} ms, {} rejected, {} timed out",
               count_of(metrics.images(), "image"), metrics.stage_percentile_ms(Stage::kTotal, 0.5),
               metrics.stage_percentile_ms(Stage::kTotal, 0.95), metrics.stage_percentile_ms(Stage::kTotal, 0.99),
               metrics.rejected(), metrics.timed_out());
  return 0;
}

}  // namespace shoplens::serve
