#include "shoplens/bench/nvml_sampler.h"

#include <dlfcn.h>

#include <chrono>

namespace shoplens {

// The few NVML entry points used, declared here so no NVML header is needed to build.
struct Nvml::Api {
  struct Utilization {
    unsigned int gpu, memory;
  };
  struct Memory {
    unsigned long long total, free, used;
  };
  using Device = void*;
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  int (*driver)(char*, unsigned int) = nullptr;
  int (*handle)(unsigned int, Device*) = nullptr;
  int (*name)(Device, char*, unsigned int) = nullptr;
  int (*utilization)(Device, Utilization*) = nullptr;
  int (*memory)(Device, Memory*) = nullptr;
  // Optional: an older driver without one reports that field as unknown (-1).
  int (*clock)(Device, int, unsigned int*) = nullptr;        // nvmlDeviceGetClockInfo: 1 SM, 2 memory
  int (*power)(Device, unsigned int*) = nullptr;             // milliwatts
  int (*temperature)(Device, int, unsigned int*) = nullptr;  // 0: the GPU die
  int (*throttle)(Device, unsigned long long*) = nullptr;
};

Nvml::Nvml() : api_(std::make_unique<Api>()) {
  handle_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!handle_) {
    why_ = "unavailable (no libnvidia-ml.so.1)";
    return;
  }
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle_, name));
    return fn != nullptr;
  };
  if (!sym(api_->init, "nvmlInit_v2") || !sym(api_->shutdown, "nvmlShutdown") ||
      !sym(api_->driver, "nvmlSystemGetDriverVersion") || !sym(api_->handle, "nvmlDeviceGetHandleByIndex_v2") ||
      !sym(api_->name, "nvmlDeviceGetName") || !sym(api_->utilization, "nvmlDeviceGetUtilizationRates") ||
      !sym(api_->memory, "nvmlDeviceGetMemoryInfo")) {
    why_ = "unavailable (libnvidia-ml.so.1 lacks an entry point)";
    return;
  }
  sym(api_->clock, "nvmlDeviceGetClockInfo");
  sym(api_->power, "nvmlDeviceGetPowerUsage");
  sym(api_->temperature, "nvmlDeviceGetTemperature");
  sym(api_->throttle, "nvmlDeviceGetCurrentClocksThrottleReasons");
  if (const int rc = api_->init(); rc != 0) {
    why_ = "unavailable (nvmlInit failed: " + std::to_string(rc) + ")";
    return;
  }
  available_ = true;
}

Nvml::~Nvml() {
  if (available_) api_->shutdown();
  if (handle_) dlclose(handle_);
}

std::string Nvml::driver_version() const {
  if (!available_) return "unavailable";
  char buf[96] = {};
  return api_->driver(buf, sizeof buf) == 0 ? std::string(buf) : "unavailable";
}

std::string Nvml::device_name(int index) const {
  if (!available_) return "";
  Api::Device d = nullptr;
  char buf[96] = {};
  if (api_->handle(static_cast<unsigned>(index), &d) != 0 || api_->name(d, buf, sizeof buf) != 0) return "";
  return buf;
}

bool Nvml::sample(int index, GpuSample& s) const {
  if (!available_) return false;
  Api::Device d = nullptr;
  Api::Utilization u{};
  Api::Memory m{};
  if (api_->handle(static_cast<unsigned>(index), &d) != 0 || api_->utilization(d, &u) != 0 || api_->memory(d, &m) != 0)
    return false;
  s.utilisation = u.gpu;
  s.memory_used_bytes = static_cast<double>(m.used);
  unsigned int v = 0;
  if (api_->clock && api_->clock(d, 1, &v) == 0) s.sm_clock_mhz = v;
  if (api_->clock && api_->clock(d, 2, &v) == 0) s.memory_clock_mhz = v;
  if (api_->power && api_->power(d, &v) == 0) s.power_watts = v / 1000.0;
  if (api_->temperature && api_->temperature(d, 0, &v) == 0) s.temperature_c = v;
  unsigned long long reasons = 0;
  if (api_->throttle && api_->throttle(d, &reasons) == 0) s.throttle_reasons = reasons;
  return true;
}

GpuSampler::GpuSampler(const Nvml& nvml, int device_index, double period_seconds)
    : nvml_(nvml), index_(device_index), period_(period_seconds) {}

GpuSampler::~GpuSampler() { stop(); }

void GpuSampler::start() {
  if (!nvml_.available() || running_) return;
  samples_.clear();
  running_ = true;
  t0_ = std::chrono::steady_clock::now();
  thread_ = std::thread([this] {
    const auto t0 = t0_;
    while (running_) {
      GpuSample s;
      if (nvml_.sample(index_, s)) {
        s.t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::lock_guard<std::mutex> lock(mutex_);
        samples_.push_back(s);
      }
      std::this_thread::sleep_for(std::chrono::duration<double>(period_));
    }
  });
}

double GpuSampler::elapsed() const {
  if (t0_ == std::chrono::steady_clock::time_point{}) return 0;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

std::vector<GpuSample> GpuSampler::stop() {
  if (running_) {
    running_ = false;
    if (thread_.joinable()) thread_.join();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  return samples_;
}

}  // namespace shoplens
