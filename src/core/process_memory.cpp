#include "shoplens/core/process_memory.h"

#include <malloc.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

namespace shoplens {

ResidentMemory read_resident_memory() {
  ResidentMemory m;
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    std::int64_t kib = 0;
    if (!(fields >> key >> kib)) continue;
    if (key == "VmRSS:")
      m.resident = kib * 1024;
    else if (key == "VmHWM:")
      m.peak = kib * 1024;
    else if (key == "RssFile:")
      m.file_backed = kib * 1024;
  }
  return m;
}

bool reset_resident_peak() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

void release_free_heap() { malloc_trim(0); }

ProgramFootprint measure_program_footprint(std::int64_t job_bytes) {
  release_free_heap();
  const ResidentMemory m = read_resident_memory();
  return {std::max<std::int64_t>(0, m.resident - job_bytes), m.file_backed};
}

std::int64_t job_resident_peak(const ProgramFootprint& program) {
  const ResidentMemory m = read_resident_memory();
  if (m.peak <= 0) return 0;
  const std::int64_t mapped_since = std::max<std::int64_t>(0, m.file_backed - program.file_backed);
  return std::max<std::int64_t>(0, m.peak - program.resident - mapped_since);
}

}  // namespace shoplens
