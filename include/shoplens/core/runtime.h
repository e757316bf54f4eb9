// Facts about the process and the LibTorch it runs on, kept out of torch headers.
#pragma once

#include <cstdint>

#include <exception>
#include <string>

#include "shoplens/core/precision.h"

namespace shoplens {

// Cores this process may run on (sched affinity), at least 1.
int usable_cores();
// 0 means "all usable cores".
int resolve_threads(int configured);
// Sets LibTorch's intra-op thread count (it starts with 1 on some machines).
void set_compute_threads(int threads);
// Keeps freed host memory in the process instead of handing large blocks back to the OS (glibc's
// mmap threshold and heap trimming), so that each training step's activations are not
// page-faulted in again; SHOPLENS_MALLOC_TUNING=0 leaves glibc's defaults (docs/PERFORMANCE.md).
// Returns whether the tuning was applied.
bool tune_host_allocator();
// Under a CPU memory budget the process, not only its tensors, is to stay within the limit: blocks
// above 1 MiB are mmapped and handed back on free, and the heap's top is trimmed past 1 MiB, so
// the process holds what is live. The retaining tuning above keeps whatever free blocks the
// threads' interleaving left behind, which made identical epochs hold from 52 to 104 MiB (glibc
// with these settings: 43-45 MiB), at a cost in speed (docs/PERFORMANCE.md). Called when a CPU
// budget is set (the memory probe's set_budget); returns whether glibc accepted the settings.
bool bound_host_allocator();
// GNU OpenMP spins its idle threads after every parallel region by default, and on a machine with
// few cores those spinners take the cores OpenBLAS's own threads need for the GEMMs: the text
// encoder and the ViTs train 2.3-2.5x slower on 2 threads than with passive waiting, while the
// CNNs (oneDNN convolutions, scheduled by the same OpenMP) run 10-45% slower with passive waiting
// (docs/PERFORMANCE.md). libgomp reads OMP_WAIT_POLICY only at process start, so for a
// GEMM-bound model on more than one thread this re-executes the process once with
// OMP_WAIT_POLICY=PASSIVE. No-op when the user set OMP_WAIT_POLICY or GOMP_SPINCOUNT, when
// SHOPLENS_OPENMP_TUNING=0, on one thread, or after the re-exec. Returns only if it did not re-exec.
void remember_command_line(int argc, char** argv);
// `gemm_bound` comes from the model registry (models/model_facts.h); `model_name` is for the log.
void prefer_passive_openmp(bool gemm_bound, int threads, const std::string& model_name);
// Seeds LibTorch's generators (weight init, dropout).
void seed_torch(std::uint64_t seed);

std::string torch_version();
bool cuda_available();
// train.device semantics: "cuda", or "auto" on a machine where CUDA is usable.
bool wants_cuda(const std::string& device);
bool wants_cuda(DeviceChoice device);
std::string cpu_model();
std::string version_string();  // version, commit, LibTorch version, CUDA yes/no
std::string build_commit();
// Local date as YYYY-MM-DD, for benchmark records.
std::string today_date();
// Peak resident set size of this process so far (getrusage), bytes.
std::uint64_t peak_rss_bytes();
std::string shoplens_version();
// True for LibTorch's out-of-memory errors (a CPU budget, CUDA), std::bad_alloc and ours.
bool is_out_of_memory(const std::exception& e);
// The message without LibTorch's C++ backtrace.
std::string error_message(const std::exception& e);

}  // namespace shoplens
