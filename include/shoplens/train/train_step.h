// One optimizer step of the configured job: forward and backward over the step's micro-batches
// (gradient accumulation), loss scaling, unscale + non-finite check, clipping, optimizer step.
// The trainer runs it in its loop; the batch finder and the benchmarks run exactly this step.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <functional>
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

// Why the training step or loop copied a value from the device to the host. On CUDA each such read
// waits for every kernel queued before it, which stalls the launch queue (docs/TRAINING.md).
enum class HostRead { kLoss, kOutcome, kGradNorm, kLossScaleCheck, kTally, kCount };

// The one door through which the step and the loop read device values on the host, counted per
// reason so that a test on the CPU can assert how many reads a step makes (CPU tensors count too:
// they stand for the reads the same code makes on a GPU).
class HostReads {
 public:
  double scalar(const at::Tensor& t, HostRead why);
  at::Tensor to_host(const at::Tensor& t, HostRead why);         // a CPU copy (contiguous)
  void note(HostRead why) { ++counts_[static_cast<int>(why)]; }  // a read made inside another API
  std::int64_t total() const;
  std::int64_t count(HostRead why) const { return counts_[static_cast<int>(why)]; }

 private:
  std::array<std::int64_t, static_cast<int>(HostRead::kCount)> counts_{};
};

// An optimizer step that skips itself on the device when `found_inf` (a one-element device tensor)
// is non-zero, as PyTorch's fused AdamW/SGD do with their found_inf argument: with it a step makes
// no host read at all. The optimizer module provides it where its implementation can.
using DeviceSkipStep = std::function<void(const at::Tensor& found_inf)>;

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
  // Leave the loss (and grad norm) on the device for the caller to read at its log steps; only the
  // step's outcome (non-finite or not) is read, in one small copy, unless `device_skip` makes that
  // unnecessary too. Ignored with `group` (the outcome all-reduce needs host values).
  bool defer_host_reads = false;
  DeviceSkipStep device_skip;  // used with defer_host_reads, fp32/bf16 only (fp16's scale is host-side)
};

struct StepResult {
  double loss = 0;           // mean per-sample loss of the step (unscaled), over every rank; NaN when not read
  double grad_norm = -1;     // before clipping; computed only when clipping is on (-1: not computed)
  std::int64_t samples = 0;  // over every rank
  bool applied = false;      // false: skipped (non-finite loss or gradients)
  bool non_finite = false;
  bool loss_non_finite = false;  // the loss itself (not only the gradients) was inf or NaN
  bool stop_requested = false;   // SIGINT/SIGTERM seen (on any rank): stop after this step
  // Deferred reads (TrainStepOptions::defer_host_reads): `loss` and `grad_norm` were not read; their
  // device values are below. Without `outcome_read` the skip happened on the device as well and
  // `applied`, `non_finite` and `loss_non_finite` are unknown on the host: `found_inf` says.
  bool loss_read = true;
  bool outcome_read = true;
  at::Tensor loss_value;       // 0-dim float64 on the step's device (non-finite when the loss was)
  at::Tensor grad_norm_value;  // 0-dim float32, or undefined without clipping
  at::Tensor found_inf;        // 0-dim bool: the step was skipped
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
  HostReads& host_reads() { return reads_; }
  // Whether a step in this configuration defers its reads, and whether it needs none at all.
  bool defers_reads() const;
  bool reads_nothing() const;
  const TrainStepOptions& options() const { return options_; }
  void set_reducer(GradientReducer* reducer) { options_.reducer = reducer; }
  void set_device_skip(DeviceSkipStep step) { options_.device_skip = std::move(step); }

 private:
  // The optimizer step when the gradients are finite (after unscaling and clipping), else none.
  void apply_or_skip(StepResult& result, const std::vector<at::Tensor>& parameters);
  // The same with the loss left on the device: one read of the outcome, or none with device_skip.
  void apply_or_skip_deferred(StepResult& result, const std::vector<at::Tensor>& parameters,
                              const at::Tensor& loss_sum);

  Classifier& model_;
  torch::optim::Optimizer& optimizer_;
  TrainStepOptions options_;
  LossScaler scaler_;
  HostReads reads_;
};

// Clips the gradients' global L2 norm to `max_norm` on the device (torch.nn.utils.clip_grad_norm_
// without its host read) and returns that norm before clipping, a 0-dim float32 device tensor.
at::Tensor clip_grad_norm_on_device(const std::vector<at::Tensor>& parameters, double max_norm);

}  // namespace shoplens
