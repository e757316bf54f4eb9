#include "shoplens/train/captured_step.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "shoplens/core/errors.h"
#include "shoplens/models/classifier.h"

#if defined(SHOPLENS_WITH_CUDA) && TORCH_VERSION_MAJOR >= 2
#include <ATen/autocast_mode.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#define SHOPLENS_CUDA_GRAPHS 1
#endif

namespace shoplens {

bool cuda_graphs_compiled() {
#ifdef SHOPLENS_CUDA_GRAPHS
  return true;
#else
  return false;
#endif
}

#ifdef SHOPLENS_CUDA_GRAPHS
namespace {

// The batch's tensors, in the order the static buffers keep them.
std::vector<at::Tensor> batch_tensors(const Batch& b) {
  return {b.images, b.input_ids, b.attention_mask, b.lengths, b.meta_categorical, b.meta_numeric, b.labels, b.targets};
}

std::string shape_text(const std::vector<at::Tensor>& tensors) {
  std::string text;
  for (const auto& t : tensors) {
    std::string shape = "-";
    if (t.defined()) {
      shape = "[";
      for (const auto n : t.sizes()) shape += (shape.size() > 1 ? "," : "") + std::to_string(n);
      shape += "]";
    }
    text += (text.empty() ? "" : " ") + shape;
  }
  return text;
}

}  // namespace

struct CapturedStep::Impl {
  Impl(Classifier& m, TrainStepOptions o, int warmup) : model(m), options(std::move(o)), warmup_left(warmup) {}

  Classifier& model;
  TrainStepOptions options;
  int warmup_left;
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
  Batch input;  // static device buffers the batches are copied into
  at::Tensor loss, found_inf, grad_norm;
  at::cuda::CUDAGraph graph;
  bool captured = false;

  // Forward, loss and backward on `input`, then the non-finite flag and the clipping: all on the
  // device, so that they can be captured.
  void passes() {
    at::Tensor step_loss;
    {
      AutocastScope autocast(true, options.precision);
      const auto logits = model.forward_batch(input, torch::Device(torch::kCUDA));  // no copy: already there
      const auto losses = per_sample_loss(logits, input.labels, input.mixed ? input.targets : at::Tensor(),
                                          options.class_weights, options.label_smoothing);
      step_loss = losses.sum() / static_cast<double>(input.size());
    }
    step_loss.backward();
    loss = step_loss.detach().to(torch::kDouble);
    found_inf = loss.isfinite().logical_not();
    if (options.clip_grad_norm > 0) {
      grad_norm = clip_grad_norm_on_device(model.parameters(), options.clip_grad_norm);
      found_inf = found_inf.logical_or(grad_norm.isfinite().logical_not());
    }
  }

  // The batch into the static buffers (the first batch makes them); Error on another shape.
  void copy_in(const Batch& batch) {
    if (!input.labels.defined()) {
      input = batch.to(torch::Device(torch::kCUDA));
      return;
    }
    const auto to = batch_tensors(input), from = batch_tensors(batch);
    for (std::size_t i = 0; i < to.size(); ++i) {
      if (to[i].defined() != from[i].defined() || (to[i].defined() && to[i].sizes() != from[i].sizes()))
        throw Error("cuda graph: a batch of shapes " + shape_text(from) + " in a step captured for " + shape_text(to) +
                    " (train.cuda_graph=off runs such steps eagerly)");
      if (to[i].defined()) to[i].copy_(from[i], /*non_blocking=*/true);
    }
    input.mixed = batch.mixed;
  }

  // Warm-up steps run on the side stream, as capture will; gradients start unset each time.
  void warm_up() {
    torch::cuda::synchronize();
    {
      c10::cuda::CUDAStreamGuard on_side(side);
      for (auto& p : model.parameters()) p.mutable_grad() = at::Tensor();
      passes();
    }
    torch::cuda::synchronize();
  }

  // Gradients unset before the capture: its backward allocates them in the graph's pool, where
  // every replay writes them again (and nothing may unset them afterwards). Autocast's weight cache
  // is off during capture (its casts would outlive the graph's inputs).
  void capture() {
    torch::cuda::synchronize();
    for (auto& p : model.parameters()) p.mutable_grad() = at::Tensor();
    const bool cache = at::autocast::is_autocast_cache_enabled();
    at::autocast::set_autocast_cache_enabled(false);
    {
      c10::cuda::CUDAStreamGuard on_side(side);
      graph.capture_begin();
      passes();
      graph.capture_end();
    }
    at::autocast::set_autocast_cache_enabled(cache);
    torch::cuda::synchronize();
    captured = true;
  }
};

CapturedStep::CapturedStep(Classifier& model, const TrainStepOptions& options, int warmup_steps) {
  if (!options.cuda || options.precision == Precision::kFp16 || !options.device_skip)
    throw Error("CapturedStep: needs CUDA, fp32 or bf16, and an optimizer step that skips on the device");
  // The class weights on the card before the capture, as TrainStep places them: a copy from the
  // host inside a capture is not allowed.
  TrainStepOptions step_options = options;
  if (step_options.class_weights.defined())
    step_options.class_weights = step_options.class_weights.to(torch::kCUDA, torch::kFloat);
  impl_ = std::make_unique<Impl>(model, std::move(step_options), std::max(1, warmup_steps));
}

StepResult CapturedStep::run(const Batch& batch) {
  auto& s = *impl_;
  s.model.train();
  s.copy_in(batch);
  if (s.warmup_left > 0) {
    --s.warmup_left;
    s.warm_up();
  } else {
    if (!s.captured) s.capture();  // capturing runs nothing: the replay below is this step's passes
    s.graph.replay();
  }
  s.options.device_skip(s.found_inf);
  StepResult r;
  r.samples = batch.size();
  r.loss = std::nan("");
  r.loss_read = false;
  r.outcome_read = false;
  r.loss_value = s.loss.clone();  // the next replay overwrites the static one
  r.found_inf = s.found_inf.clone();
  if (s.grad_norm.defined()) r.grad_norm_value = s.grad_norm.clone();
  return r;
}

bool CapturedStep::captured() const { return impl_->captured; }

#else

struct CapturedStep::Impl {};

CapturedStep::CapturedStep(Classifier&, const TrainStepOptions&, int) {
  throw Error("CapturedStep: this build cannot capture CUDA graphs (it needs LibTorch 2.x built with CUDA)");
}

StepResult CapturedStep::run(const Batch&) { throw Error("CapturedStep: not available in this build"); }

bool CapturedStep::captured() const { return false; }

#endif

CapturedStep::~CapturedStep() = default;

}  // namespace shoplens
