// A probe of the real training job at a given micro-batch: the configured model, optimizer and
// TrainStep (AMP, loss scaling, clipping, optimizer state) for a few steps, then an evaluation
// forward, on worst-case inputs (largest input size, mixed soft targets), with the loader's batch
// buffers held where they share the device's memory (CPU), and the EMA copy of the weights when
// train.ema_decay is set. Measures the tensors' peak memory and speed; on CPU also the process's
// resident peak (ProbeResult::process_peak_bytes, docs/FIND_BATCH.md).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "shoplens/batch/batch_search.h"
#include "shoplens/core/config.h"

namespace shoplens {

class MemoryProbe;

class JobProbe {
 public:
  // Create `memory` before the probe: the model's weights must be allocated under its watch.
  JobProbe(const Config& config, int num_classes, MemoryProbe& memory);
  ~JobProbe();
  // `steps` training steps at `batch` (then the evaluation forward). Out-of-memory is an
  // outcome, not an exception; other failures are reported as kFailed.
  ProbeResult run(int batch, int steps);
  // Weights + gradients + optimizer state: what no batch size can go below.
  std::int64_t static_bytes_estimate() const;
  // CPU: the program's own resident footprint (libraries, code) that the probes' process peaks are
  // net of, measured when the probe was made; 0 on CUDA or where peaks cannot be measured.
  std::int64_t program_resident_bytes() const;
  // Training batches the loader keeps alive at once on the device (0 on CUDA: they live on the host).
  int loader_batches_held() const;
  bool cuda() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace shoplens
