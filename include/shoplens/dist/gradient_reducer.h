// Data-parallel gradient averaging the way DDP does it: parameters grouped into buckets of about
// dist.bucket_mb (in reverse order, the order backward produces their gradients), each bucket's
// all-reduce started asynchronously from an autograd hook the moment its last gradient is
// accumulated, so communication overlaps the rest of backward. Buckets are launched strictly in
// index order so every rank issues the same collectives in the same order. Only the backward
// that follows arm() is reduced: accumulation micro-steps before it stay local (DDP's no_sync).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace shoplens {

class ProcessGroup;

struct ReducerStats {
  std::int64_t steps = 0;
  std::int64_t buckets = 0;             // per step
  std::int64_t bytes_per_step = 0;      // gradient bytes all-reduced per step
  double launched_during_backward = 0;  // fraction of buckets started before backward returned
  double wait_seconds = 0;              // total time finish() blocked on communication (exposed)
};

class GradientReducer {
 public:
  // `parameters`: the ones that train (requires_grad), in the model's order. Rebuild the reducer
  // when that set changes (gradual unfreezing); every rank does so at the same step.
  GradientReducer(std::shared_ptr<ProcessGroup> group, std::vector<at::Tensor> parameters, std::int64_t bucket_bytes);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // The next backward's gradients are reduced as they become ready.
  void arm();
  // After that backward (or instead of it, after a failure): starts what is left, waits, and
  // leaves every parameter's gradient equal to the mean over ranks (undefined gradients count as
  // zero, so a rank that failed still takes part with the same collectives).
  void finish();
  // false: every bucket waits for finish() (all communication after backward): the baseline that
  // the overlap is measured against (bench-train --no-overlap).
  void set_overlap(bool overlap);

  const ReducerStats& stats() const;
  std::int64_t num_buckets() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace shoplens
