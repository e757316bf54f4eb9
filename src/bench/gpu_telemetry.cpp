// Per-trial GPU telemetry from NVML samples (bench_results.h): plain C++, tested on fake samples.
#include <algorithm>
#include <utility>

#include "shoplens/bench/bench_results.h"

namespace shoplens {
namespace {

// nvml.h's nvmlClocksThrottleReason* bits.
const std::vector<std::pair<std::uint64_t, const char*>>& throttle_bits() {
  static const std::vector<std::pair<std::uint64_t, const char*>> bits = {{0x1, "gpu_idle"},
                                                                          {0x2, "applications_clocks_setting"},
                                                                          {0x4, "sw_power_cap"},
                                                                          {0x8, "hw_slowdown"},
                                                                          {0x10, "sync_boost"},
                                                                          {0x20, "sw_thermal_slowdown"},
                                                                          {0x40, "hw_thermal_slowdown"},
                                                                          {0x80, "hw_power_brake_slowdown"},
                                                                          {0x100, "display_clock_setting"}};
  return bits;
}

constexpr std::uint64_t kNotSlowing = 0x1 | 0x2;  // idle, or clocks the user set

}  // namespace

bool TrialGpu::throttled() const { return (throttle_reasons & ~kNotSlowing) != 0; }

std::string throttle_reason_names(std::uint64_t mask) {
  std::string out;
  for (const auto& [bit, name] : throttle_bits())
    if (mask & bit) out += (out.empty() ? "" : ",") + std::string(name);
  return out;
}

TrialGpu summarise_trial_gpu(const std::vector<GpuSample>& samples, double begin, double end) {
  TrialGpu g;
  double power = 0;
  int powered = 0;
  auto lowest = [](double& into, double v) {
    if (v >= 0) into = into < 0 ? v : std::min(into, v);
  };
  for (const auto& s : samples) {
    if (s.t < begin || s.t >= end) continue;
    ++g.samples;
    lowest(g.sm_clock_mhz_min, s.sm_clock_mhz);
    lowest(g.memory_clock_mhz_min, s.memory_clock_mhz);
    if (s.temperature_c >= 0) g.temperature_c_max = std::max(g.temperature_c_max, s.temperature_c);
    if (s.power_watts >= 0) {
      power += s.power_watts;
      ++powered;
    }
    g.throttle_reasons |= s.throttle_reasons;
  }
  if (powered) g.power_watts_mean = power / powered;
  return g;
}

int ScenarioResult::throttled_trials() const {
  return static_cast<int>(
      std::count_if(trial_gpu.begin(), trial_gpu.end(), [](const auto& g) { return g.throttled(); }));
}

}  // namespace shoplens
