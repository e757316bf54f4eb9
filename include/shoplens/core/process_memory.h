// The process's resident memory as Linux reports it (/proc/self/status), for CPU memory budgets
// that cover the whole job rather than only the tensors LibTorch allocates: untracked buffers
// (oneDNN scratch, decoders), the allocator's retained free blocks, thread stacks.
#pragma once

#include <cstdint>

namespace shoplens {

struct ResidentMemory {
  std::int64_t resident = 0;     // VmRSS: resident now (anonymous + file-backed + shared)
  std::int64_t peak = 0;         // VmHWM: the largest VmRSS since start or the last reset
  std::int64_t file_backed = 0;  // RssFile: mapped files (libraries, shards read through mmap)
};

// Zeros where /proc/self/status cannot be read.
ResidentMemory read_resident_memory();
// Restarts VmHWM from the current VmRSS (/proc/self/clear_refs); false where the kernel refuses
// (some sandboxes), and then peaks cannot be measured per phase.
bool reset_resident_peak();
// Returns the allocator's free blocks to the system (glibc malloc_trim), so that a peak measured
// next starts from what is in use, not from what an earlier phase left cached.
void release_free_heap();

// The program's own footprint that no batch size changes: resident memory less `job_bytes` (the
// tensors the job already holds, e.g. the model's weights), after the free heap was released.
struct ProgramFootprint {
  std::int64_t resident = 0;     // libraries, code, runtime buffers
  std::int64_t file_backed = 0;  // RssFile at that moment
};
ProgramFootprint measure_program_footprint(std::int64_t job_bytes);
// The job's resident peak since the last reset_resident_peak(): VmHWM less the program's
// footprint and less the file-backed pages mapped since (shard files read through mmap are page
// cache the kernel can reclaim, not memory the job allocated). 0 when unreadable.
std::int64_t job_resident_peak(const ProgramFootprint& program);

}  // namespace shoplens
