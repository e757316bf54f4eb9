// Progress of long work: a redrawn bar with rate and ETA when stderr is a terminal, and a plain
// log line every `interval_seconds` otherwise (CI logs, files). Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace shoplens {

class Progress {
 public:
  Progress(std::string label, std::uint64_t total, std::string unit = "items", double interval_seconds = 10.0);
  ~Progress();
  void advance(std::uint64_t n = 1);
  // Work done before this process (a resumed run): counted as done, never as this run's rate.
  void resume_at(std::uint64_t done);
  void finish();
  // Extra text shown after the counters (e.g. "loss 0.412").
  void set_suffix(std::string suffix);
  double rate() const;  // units per second so far, in this process

 private:
  void render(bool final_line);

  std::string label_;
  std::string unit_;
  std::string suffix_;
  std::uint64_t total_;
  std::atomic<std::uint64_t> done_{0};
  std::atomic<std::uint64_t> done_before_{0};  // resume_at
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_render_;
  double interval_;
  bool tty_;
  bool finished_ = false;
  std::mutex mutex_;
  std::mutex suffix_mutex_;  // render() may run under mutex_
};

}  // namespace shoplens
