// One optimizer step of the configured job: forward and backward over the step's micro-batches
// (gradient accumulation), loss scaling, unscale + non-finite check, clipping, optimizer step.
// The trainer runs it in its loop; the batch finder and the benchmarks run exactly this step.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "shoplens/core/config.h"
#include "shoplens/data/loader.h"
#include "shoplens/train/amp.h"

namespace torch::optim {
class Optimizer;
}

namespace shoplens {

class Classifier;
class GradientReducer;
class ProcessGroup;

struct TrainStepOptions {
  Precision precision = Precision::kFp32;
  bool cuda = false;
  double clip_grad_norm = 0;  // 0: off
  double label_smoothing = 0;
  at::Tensor class_weights;  // [C] float, or undefined
  LossScalerOptions scaler;
  // Data-parallel: gradients are averaged by `reducer` during the last micro-batch's backward, and
  // every rank agrees on the step's outcome (loss, non-finite, out of memory, stop) through `group`.
  GradientReducer* reducer = nullptr;
  ProcessGroup* group = nullptr;
};

struct StepResult {
  double loss = 0;           // mean per-sample loss of the step (unscaled), over every rank
  double grad_norm = -1;     // before clipping; computed only when clipping is on (-1: not computed)
  std::int64_t samples = 0;  // over every rank
  bool applied = false;      // false: skipped (non-finite loss or gradients)
  bool non_finite = false;
  bool stop_requested = false;  // SIGINT/SIGTERM seen (on any rank): stop after this step
};

// Per-sample cross-entropy against hard labels or soft targets (mixup/cutmix), with label
// smoothing and optional class weights: loss_i = -sum_c w_c t_ic log softmax(z_i)_c. Computed
// in float32 whatever the autocast dtype.
at::Tensor per_sample_loss(const at::Tensor& logits, const at::Tensor& labels, const at::Tensor& soft_targets,
                           const at::Tensor& class_weights, double label_smoothing);

// The step options of the configured job (clipping, label smoothing, fp16 loss scaling); class
// weights are the caller's (they need the data).
TrainStepOptions step_options_from_config(const Config& config, Precision precision, bool cuda);

// A backward that fails (out of memory) leaves its queued autograd tasks, nodes with their saved
// activations, in the engine's ready queue for that device until the next backward there: a smaller
// retry, or the batch finder's next probe, found gigabytes still allocated (text_tiny: 950 MiB after
// an OOM at batch 104). A one-element backward on the device drains them.
void drain_failed_backward(bool cuda);

class TrainStep {
 public:
  TrainStep(Classifier& model, torch::optim::Optimizer& optimizer, TrainStepOptions options);
  // The micro-batches of one optimizer step. The loss is the sum of per-sample losses over all of
  // them divided by their total count, so k micro-batches of b give the gradients of one batch
  // of k*b (models without batch statistics: exactly; with BatchNorm: per micro-batch statistics).
  StepResult run(const std::vector<Batch>& micro_batches);
  LossScaler& scaler() { return scaler_; }
  const TrainStepOptions& options() const { return options_; }
  void set_reducer(GradientReducer* reducer) { options_.reducer = reducer; }

 private:
  // The optimizer step when the gradients are finite (after unscaling and clipping), else none.
  void apply_or_skip(StepResult& result, const std::vector<at::Tensor>& parameters);

  Classifier& model_;
  torch::optim::Optimizer& optimizer_;
  TrainStepOptions options_;
  LossScaler scaler_;
};

}  // namespace shoplens
