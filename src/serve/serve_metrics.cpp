#include "shoplens/serve/serve_metrics.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include <fmt/format.h>

#include "shoplens/core/stats.h"
#include "shoplens/core/enum_names.h"

namespace shoplens::serve {

namespace {

constexpr EnumName<Stage> kStageNames[] = {{Stage::kQueueWait, "queue_wait"},
                                           {Stage::kPreprocess, "preprocess"},
                                           {Stage::kHostToDevice, "host_to_device"},
                                           {Stage::kCompute, "compute"},
                                           {Stage::kTotal, "total"}};

}  // namespace

const char* stage_name(Stage stage) { return name_in(kStageNames, stage); }

void LatencyWindow::add(double ms) {
  if (ring_.size() < capacity_) {
    ring_.push_back(ms);
  } else {
    ring_[next_] = ms;
    next_ = (next_ + 1) % capacity_;
  }
  ++count_;
  sum_ms_ += ms;
}

double LatencyWindow::percentile_ms(double q) const { return percentile(ring_, q); }

ServeMetrics::ServeMetrics(int max_batch, double rate_window_s)
    : max_batch_(std::max(1, max_batch)), rate_window_s_(rate_window_s), started_(Clock::now()), stages_(kStageCount) {}

void ServeMetrics::observe(Stage stage, double ms) {
  std::lock_guard<std::mutex> lock(mutex_);
  stages_[static_cast<int>(stage)].add(ms);
}

void ServeMetrics::observe_batch(int size, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mutex_);
  batch_sizes_[size]++;
  ++batches_;
  images_ += static_cast<std::uint64_t>(size);
  recent_batches_.emplace_back(now, size);
  const auto horizon = now - std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(rate_window_s_));
  while (!recent_batches_.empty() && recent_batches_.front().first < horizon) recent_batches_.pop_front();
}

void ServeMetrics::count_response(int http_status) {
  std::lock_guard<std::mutex> lock(mutex_);
  responses_[http_status]++;
}
void ServeMetrics::count_rejected() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++rejected_;
}
void ServeMetrics::count_timed_out() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++timed_out_;
}
void ServeMetrics::set_queue_length_source(std::function<std::size_t()> source) {
  std::lock_guard<std::mutex> lock(mutex_);
  queue_length_ = std::move(source);
}
void ServeMetrics::set_ready(bool ready) {
  std::lock_guard<std::mutex> lock(mutex_);
  ready_ = ready;
}
void ServeMetrics::set_latency_curve(const std::vector<std::pair<int, double>>& batch_p95_ms) {
  std::lock_guard<std::mutex> lock(mutex_);
  curve_ = batch_p95_ms;
}

std::uint64_t ServeMetrics::rejected() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return rejected_;
}
std::uint64_t ServeMetrics::timed_out() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return timed_out_;
}
std::uint64_t ServeMetrics::images() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return images_;
}

double ServeMetrics::stage_percentile_ms(Stage stage, double q) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stages_[static_cast<int>(stage)].percentile_ms(q);
}

double ServeMetrics::images_per_second(Clock::time_point now) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto horizon = now - std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(rate_window_s_));
  std::uint64_t n = 0;
  for (const auto& [t, size] : recent_batches_)
    if (t >= horizon && t <= now) n += static_cast<std::uint64_t>(size);
  // Early on the window is the time since start, so the first seconds are not under-reported.
  const double window = std::min(rate_window_s_, std::chrono::duration<double>(now - started_).count());
  return window > 0 ? static_cast<double>(n) / window : 0;
}

namespace {
// Prometheus floats: shortest round-trip form, with the special values spelled its way.
std::string num(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}
void header(std::ostringstream& out, const char* name, const char* type, const char* help) {
  out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
}
}  // namespace

std::string ServeMetrics::prometheus(Clock::time_point now) const {
  const double rate = images_per_second(now);
  std::size_t queue = 0;
  std::function<std::size_t()> source;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    source = queue_length_;
  }
  if (source) queue = source();  // outside our lock: the batcher takes its own

  std::lock_guard<std::mutex> lock(mutex_);
  std::ostringstream out;
  write_latency_locked(out);
  write_batch_sizes_locked(out);
  write_counters_locked(out, queue, rate);
  return out.str();
}

void ServeMetrics::write_latency_locked(std::ostringstream& out) const {
  header(out, "shoplens_serve_latency_seconds", "summary",
         "Per-stage latency of classify requests; quantiles over the last 4096 observations.");
  for (int s = 0; s < kStageCount; ++s) {
    const auto& w = stages_[s];
    const char* name = stage_name(static_cast<Stage>(s));
    for (double q : {0.5, 0.95, 0.99})
      out << "shoplens_serve_latency_seconds{stage=\"" << name << "\",quantile=\"" << num(q) << "\"} "
          << num(w.percentile_ms(q) / 1e3) << '\n';
    out << "shoplens_serve_latency_seconds_sum{stage=\"" << name << "\"} " << num(w.sum_ms() / 1e3) << '\n';
    out << "shoplens_serve_latency_seconds_count{stage=\"" << name << "\"} " << w.count() << '\n';
  }
}

void ServeMetrics::write_batch_sizes_locked(std::ostringstream& out) const {
  header(out, "shoplens_serve_batch_size", "histogram", "Achieved micro-batch sizes.");
  std::uint64_t cumulative = 0, sum = 0;
  auto it = batch_sizes_.begin();
  for (int le = 1;; le *= 2) {
    const int bound = std::min(le, max_batch_);
    for (; it != batch_sizes_.end() && it->first <= bound; ++it) {
      cumulative += it->second;
      sum += it->second * static_cast<std::uint64_t>(it->first);
    }
    out << "shoplens_serve_batch_size_bucket{le=\"" << bound << "\"} " << cumulative << '\n';
    if (bound >= max_batch_) break;
  }
  for (; it != batch_sizes_.end(); ++it) {
    cumulative += it->second;
    sum += it->second * static_cast<std::uint64_t>(it->first);
  }
  out << "shoplens_serve_batch_size_bucket{le=\"+Inf\"} " << cumulative << '\n';
  out << "shoplens_serve_batch_size_sum " << sum << '\n';
  out << "shoplens_serve_batch_size_count " << batches_ << '\n';
}

void ServeMetrics::write_counters_locked(std::ostringstream& out, std::size_t queue, double rate) const {
  header(out, "shoplens_serve_queue_length", "gauge", "Requests waiting for a batch.");
  out << "shoplens_serve_queue_length " << queue << '\n';
  header(out, "shoplens_serve_requests_total", "counter", "HTTP responses by status code.");
  for (const auto& [code, n] : responses_)
    out << "shoplens_serve_requests_total{code=\"" << code << "\"} " << n << '\n';
  header(out, "shoplens_serve_rejected_total", "counter", "Requests rejected at once because the queue was full.");
  out << "shoplens_serve_rejected_total " << rejected_ << '\n';
  header(out, "shoplens_serve_timed_out_total", "counter", "Requests dropped after waiting past their timeout.");
  out << "shoplens_serve_timed_out_total " << timed_out_ << '\n';
  header(out, "shoplens_serve_images_total", "counter", "Images run through the model.");
  out << "shoplens_serve_images_total " << images_ << '\n';
  header(out, "shoplens_serve_images_per_second", "gauge", "Images run through the model per second, recent window.");
  out << "shoplens_serve_images_per_second " << num(rate) << '\n';
  header(out, "shoplens_serve_ready", "gauge", "1 once warm-up is done and until draining starts.");
  out << "shoplens_serve_ready " << (ready_ ? 1 : 0) << '\n';
  if (!curve_.empty()) {
    header(out, "shoplens_serve_model_p95_seconds", "gauge", "Model p95 latency per batch size, measured at warm-up.");
    for (const auto& [b, ms] : curve_)
      out << "shoplens_serve_model_p95_seconds{batch=\"" << b << "\"} " << num(ms / 1e3) << '\n';
  }
}

}  // namespace shoplens::serve
