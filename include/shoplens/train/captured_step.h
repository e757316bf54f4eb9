// A training step captured once into a CUDA graph and replayed (train.cuda_graph,
// docs/TRAINING.md). Forward, loss, backward, the non-finite flag and the gradient clipping are
// one graph launch on static device buffers that each batch is copied into; the optimizer step
// then runs eagerly and skips a non-finite step on the device (TrainStepOptions::device_skip), so
// a step neither reads the host nor launches its forward and backward kernel by kernel.
// LibTorch 2.x built with CUDA only (cuda_graphs_compiled()); cuda_graph_decision says which runs.
#pragma once

#include <memory>

#include "shoplens/train/train_step.h"

namespace shoplens {

class Classifier;

// Whether this binary can capture a step (LibTorch 2.x with CUDA).
bool cuda_graphs_compiled();

// Eager steps before the capture: cuDNN picks its algorithms and the allocator settles.
inline constexpr int kCapturedStepWarmup = 3;

class CapturedStep {
 public:
  // `options` must be CUDA, not fp16, with device_skip set; Error otherwise or when this binary
  // cannot capture. The first `warmup_steps` steps run eagerly on a side stream (cuDNN and the
  // allocator settle), the next one captures the passes, and every later one replays them.
  CapturedStep(Classifier& model, const TrainStepOptions& options, int warmup_steps = kCapturedStepWarmup);
  ~CapturedStep();
  CapturedStep(const CapturedStep&) = delete;
  CapturedStep& operator=(const CapturedStep&) = delete;

  // One optimizer step on one micro-batch of the captured shape (Error on another shape). Its
  // loss, grad norm and outcome stay on the device (StepResult::loss_value, found_inf).
  StepResult run(const Batch& batch);
  bool captured() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace shoplens
