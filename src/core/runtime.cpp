#include "shoplens/core/runtime.h"

#include <malloc.h>

#include <cstdlib>
#include <limits>

#include <sys/resource.h>

#include <ctime>

#include <sched.h>

#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <spdlog/spdlog.h>

#include "shoplens/core/torch_release.h"

namespace shoplens {

namespace build_info {
extern const char* const kVersion;
extern const char* const kCommit;
}  // namespace build_info

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  return 1;
}

namespace {
std::vector<char*> g_argv;  // main's argv, for the one re-exec
}  // namespace

void remember_command_line(int argc, char** argv) { g_argv.assign(argv, argv + argc); }

void prefer_passive_openmp(bool gemm_bound, int threads, const std::string& model_name) {
  if (threads <= 1 || !gemm_bound || g_argv.empty()) return;
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return;
  if (const char* tuning = std::getenv("SHOPLENS_OPENMP_TUNING"); tuning && std::string(tuning) == "0") return;
  spdlog::info(
      "{} is GEMM-bound: restarting with OMP_WAIT_POLICY=PASSIVE so OpenMP's idle threads leave the cores to "
      "OpenBLAS (SHOPLENS_OPENMP_TUNING=0 or an explicit OMP_WAIT_POLICY keeps the default)",
      model_name);
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  std::vector<char*> args = g_argv;
  args.push_back(nullptr);
  execv("/proc/self/exe", args.data());
  spdlog::warn("could not restart with OMP_WAIT_POLICY=PASSIVE; continuing with OpenMP's default wait policy");
}

bool tune_host_allocator() {
  if (const char* setting = std::getenv("SHOPLENS_MALLOC_TUNING"); setting && std::string(setting) == "0") return false;
  // LibTorch frees a step's activations and allocates the same sizes again the next step. glibc
  // serves blocks above a dynamic threshold with mmap and trims the top of the heap, so every
  // step page-faults (and zeroes) tens of MB afresh: 30-40% of a small CNN's CPU step here.
  // 32 MiB is the largest mmap threshold glibc accepts on 64-bit; never trimming keeps the peak
  // resident, as CUDA's caching allocator does on the device.
  const bool ok = mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024) == 1;
  return mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max()) == 1 && ok;
}

bool bound_host_allocator() {
  constexpr int kBoundBytes = 1 << 20;
  const bool ok = mallopt(M_MMAP_THRESHOLD, kBoundBytes) == 1;
  const bool trimmed = mallopt(M_TRIM_THRESHOLD, kBoundBytes) == 1 && ok;
  malloc_trim(0);  // what the retaining policy kept until now
  return trimmed;
}

int resolve_threads(int configured) {
  if (configured > 0) return configured;
  // A launcher running several processes per machine divides the cores through OMP_NUM_THREADS
  // (torchrun's convention; `shoplens launch` does the same).
  if (const char* omp = std::getenv("OMP_NUM_THREADS"); omp && std::atoi(omp) > 0) return std::atoi(omp);
  return usable_cores();
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto pos = line.find(':');
      if (pos != std::string::npos) return line.substr(pos + 2);
    }
  }
  return "unknown CPU";
}

std::string build_commit() { return build_info::kCommit; }
std::string shoplens_version() { return build_info::kVersion; }

std::string version_string() {
  return "shoplens " + shoplens_version() + " (commit " + build_commit() + ")\nLibTorch " +
         torch_release_description() + "\nCUDA " + (cuda_available() ? "yes" : "no");
}

std::string today_date() {
  const std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::localtime(&now));
  return buf;
}

std::uint64_t peak_rss_bytes() {
  struct rusage usage {};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

}  // namespace shoplens
