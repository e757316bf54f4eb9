// CPU memory budgets that hold for the job's whole process, not only for its tensors
// (find_batch.process_check, docs/FIND_BATCH.md "The process"). The tensors' search answers with
// a batch whose tensors fit; beside them a CPU process holds oneDNN's primitives and scratch, the
// allocator's free blocks and the decoders' buffers, which no allocator hook sees. Each probe of
// this step runs in a fresh process (nothing probed before it has left primitives behind), at one
// batch, and measures that process.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shoplens/core/config.h"

namespace shoplens {

struct ProcessProbe {
  int batch = 0;
  bool ran = false;                     // false: the tensors ran out of their budget (an OOM)
  std::int64_t tensors_peak_bytes = 0;  // the tracking allocator's peak
  std::int64_t process_peak_bytes = 0;  // the job's resident peak (0: the process could not be measured)
  double seconds = 0;
};
using ProcessProbeFn = std::function<ProcessProbe(int batch)>;

struct ProcessFit {
  int batch = 0;         // the largest probed batch whose process fits (the start when unmeasured)
  bool measured = true;  // false: this machine cannot measure a process (no /proc/self/clear_refs)
  std::vector<ProcessProbe> probes;
  std::string note;  // what was done, for the plan's notes ("" when the first probe fit)
};

// From `start` (the tensors' answer) down: probe it; when its process is over `usable_bytes`, probe
// the batch that scales the process down to it (aimed a tenth short), then, once a batch fits, the
// batch that the line through the fitting and the failing probe puts at the edge. At most four
// probes. Throws Error when no probed batch fits, naming the memory it needed.
ProcessFit fit_process(int start, std::int64_t usable_bytes, int round_to, const ProcessProbeFn& probe);

nlohmann::json process_fit_to_json(const ProcessFit& fit, std::int64_t usable_bytes);

// A folder of its own under the temp dir for the probes' config, results and logs, made on the
// first call of path() (a search that runs no process probe makes none) and removed with it.
class ProbeFolder {
 public:
  ProbeFolder() = default;
  ~ProbeFolder();
  ProbeFolder(const ProbeFolder&) = delete;
  ProbeFolder& operator=(const ProbeFolder&) = delete;
  const std::filesystem::path& path();

 private:
  std::filesystem::path path_;
};

// A ProcessProbeFn that runs `exe find-batch --probe-process-at N` (exe must be the shoplens
// program: tests' binaries are not) with `config` (written into `folder` at the first probe, without
// data.shards: the probe reads no data) and `num_classes`, and reads the child's JSON. `folder` must
// outlive the function.
ProcessProbeFn spawn_process_probe(const std::filesystem::path& exe, const Config& config, int num_classes,
                                   ProbeFolder& folder);
// The child's side: one probe at `batch`, `find_batch.process_steps` steps and an evaluation, in
// this process, which must not have probed anything before (find_batch_torch.cpp).
ProcessProbe probe_this_process(const Config& config, int num_classes, int batch);
// The JSON the child writes and spawn_process_probe reads.
nlohmann::json process_probe_to_json(const ProcessProbe& probe);
ProcessProbe process_probe_from_json(const nlohmann::json& doc);

}  // namespace shoplens
