// The server's metrics, rendered in Prometheus text format (version 0.0.4) for GET /metrics:
// per-stage latency percentiles over a window of recent requests, the achieved batch-size
// histogram, queue length, responses by HTTP code, rejected and timed-out counts, images/s.
// Pure C++ and thread-safe; time is passed in so tests need no clock.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

namespace shoplens::serve {

enum class Stage { kQueueWait, kPreprocess, kHostToDevice, kCompute, kTotal };
constexpr int kStageCount = 5;
const char* stage_name(Stage stage);

// The last `capacity` samples (for percentiles) plus all-time count and sum (for rates).
class LatencyWindow {
 public:
  explicit LatencyWindow(std::size_t capacity = 4096) : capacity_(capacity) {}
  void add(double ms);
  double percentile_ms(double q) const;
  std::uint64_t count() const { return count_; }
  double sum_ms() const { return sum_ms_; }

 private:
  std::size_t capacity_;
  std::vector<double> ring_;
  std::size_t next_ = 0;
  std::uint64_t count_ = 0;
  double sum_ms_ = 0;
};

class ServeMetrics {
 public:
  using Clock = std::chrono::steady_clock;
  // Batch-size buckets are 1, 2, 4, ... up to max_batch (and +Inf).
  explicit ServeMetrics(int max_batch, double rate_window_s = 10.0);

  void observe(Stage stage, double ms);
  void observe_batch(int size, Clock::time_point now);
  void count_response(int http_status);
  void count_rejected();
  void count_timed_out();
  void set_queue_length_source(std::function<std::size_t()> source);
  void set_ready(bool ready);
  void set_latency_curve(const std::vector<std::pair<int, double>>& batch_p95_ms);

  std::uint64_t rejected() const;
  std::uint64_t timed_out() const;
  std::uint64_t images() const;
  double images_per_second(Clock::time_point now) const;
  double stage_percentile_ms(Stage stage, double q) const;

  std::string prometheus(Clock::time_point now) const;

 private:
  // The parts of prometheus(), with mutex_ held.
  void write_latency_locked(std::ostringstream& out) const;
  void write_batch_sizes_locked(std::ostringstream& out) const;
  void write_counters_locked(std::ostringstream& out, std::size_t queue, double rate) const;

  mutable std::mutex mutex_;
  int max_batch_;
  double rate_window_s_;
  Clock::time_point started_;
  std::vector<LatencyWindow> stages_;
  std::map<int, std::uint64_t> batch_sizes_;
  std::uint64_t batches_ = 0;
  std::uint64_t images_ = 0;
  std::deque<std::pair<Clock::time_point, int>> recent_batches_;
  std::map<int, std::uint64_t> responses_;
  std::uint64_t rejected_ = 0;
  std::uint64_t timed_out_ = 0;
  bool ready_ = false;
  std::function<std::size_t()> queue_length_;
  std::vector<std::pair<int, double>> curve_;
};

}  // namespace shoplens::serve
