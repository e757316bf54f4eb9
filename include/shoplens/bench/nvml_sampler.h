// GPU utilisation and memory over time through NVML, loaded with dlopen("libnvidia-ml.so.1") at
// run time: never a link dependency, so the same binary runs on machines without a driver and
// reports "unavailable" there.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "shoplens/bench/bench_results.h"

namespace shoplens {

class Nvml {
 public:
  // Loads and initialises NVML; available() is false (with why()) when it cannot.
  Nvml();
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;
  bool available() const { return available_; }
  const std::string& why() const { return why_; }
  std::string driver_version() const;  // "unavailable" when not available
  std::string device_name(int index) const;
  // Utilisation (percent), memory used (bytes), and where the driver has them the SM and memory
  // clocks, power, temperature and throttle reasons of device `index` (all but `t`); false on failure.
  bool sample(int index, GpuSample& sample) const;

 private:
  struct Api;
  void* handle_ = nullptr;
  std::unique_ptr<Api> api_;
  bool available_ = false;
  std::string why_;
};

// Samples one device every `period_seconds` on a thread between start() and stop().
class GpuSampler {
 public:
  GpuSampler(const Nvml& nvml, int device_index, double period_seconds = 0.1);
  ~GpuSampler();
  void start();
  // Stops and returns the samples since start().
  std::vector<GpuSample> stop();
  // Seconds since start() (0 before): the trials' boundaries on the samples' clock.
  double elapsed() const;

 private:
  const Nvml& nvml_;
  int index_;
  double period_;
  std::atomic<bool> running_{false};
  std::thread thread_;
  std::mutex mutex_;
  std::vector<GpuSample> samples_;
  std::chrono::steady_clock::time_point t0_{};
};

}  // namespace shoplens
