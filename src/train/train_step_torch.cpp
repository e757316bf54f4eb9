#include "shoplens/train/train_step.h"

#include <torch/torch.h>

#include <cmath>

#include "shoplens/core/errors.h"
#include "shoplens/core/runtime.h"
#include "shoplens/models/classifier.h"

namespace shoplens {

at::Tensor per_sample_loss(const at::Tensor& logits, const at::Tensor& labels, const at::Tensor& soft_targets,
                           const at::Tensor& class_weights, double label_smoothing) {
  namespace F = torch::nn::functional;
  const auto logits32 = logits.to(torch::kFloat);
  if (!soft_targets.defined()) {
    // Hard labels: LibTorch's fused kernel computes the same formula with fewer passes.
    auto options = F::CrossEntropyFuncOptions().reduction(torch::kNone).label_smoothing(label_smoothing);
    if (class_weights.defined()) options.weight(class_weights.to(logits32.device(), torch::kFloat));
    return F::cross_entropy(logits32, labels.to(logits32.device()), options);
  }
  const auto log_probs = torch::log_softmax(logits32, 1);
  const int64_t num_classes = logits.size(1);
  at::Tensor target = soft_targets.to(log_probs.device(), torch::kFloat);
  if (label_smoothing > 0) target = target * (1.0 - label_smoothing) + label_smoothing / num_classes;
  if (class_weights.defined()) target = target * class_weights.to(log_probs.device(), torch::kFloat).unsqueeze(0);
  return -(target * log_probs).sum(1);
}

TrainStepOptions step_options_from_config(const Config& config, Precision precision, bool cuda) {
  TrainStepOptions o;
  o.precision = precision;
  o.cuda = cuda;
  o.clip_grad_norm = config.optim.clip_grad_norm;
  o.label_smoothing = config.train.label_smoothing;
  o.scaler = {precision == Precision::kFp16, config.train.init_loss_scale, 2.0, 0.5, config.train.loss_scale_growth_interval};
  return o;
}

TrainStep::TrainStep(ImageClassifier& model, torch::optim::Optimizer& optimizer, TrainStepOptions options)
    : model_(model), optimizer_(optimizer), options_(std::move(options)), scaler_(options_.scaler) {
  if (options_.precision != Precision::kFp16) scaler_ = LossScaler(LossScalerOptions{});  // scaling is for fp16 only
}

StepResult TrainStep::run(const std::vector<Batch>& micro_batches) {
  StepResult result;
  for (const auto& b : micro_batches) result.samples += b.images.size(0);
  if (result.samples == 0) throw Error("TrainStep::run: no samples in the step");
  const auto device = options_.cuda ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);

  model_.train();
  // Gradients start undefined (PyTorch's set_to_none): backward then writes instead of adding to
  // zeros, and frozen parameters keep no stale gradient for the optimizer to apply.
  const auto parameters = model_.parameters();
  for (const auto& p : parameters) p.mutable_grad() = at::Tensor();
  at::Tensor loss_sum;  // stays on the device: one host sync per step, not per micro-batch
  try {
    for (const auto& batch : micro_batches) {
      at::Tensor loss;
      {
        AutocastScope autocast(options_.cuda, options_.precision);
        auto images = batch.images.to(device, /*non_blocking=*/true);
        auto logits = model_.forward(images);
        auto losses = per_sample_loss(logits, batch.labels, batch.mixed ? batch.targets : at::Tensor(),
                                      options_.class_weights, options_.label_smoothing);
        // Dividing by the step's total sample count makes accumulation equal one big batch.
        loss = losses.sum() / static_cast<double>(result.samples);
      }
      loss_sum = loss_sum.defined() ? loss_sum + loss.detach() : loss.detach();
      scaler_.scale_loss(loss).backward();
    }
  } catch (const std::exception& e) {
    if (!is_out_of_memory(e)) throw;
    // Nothing of the step was applied: drop its partial gradients so a smaller retry starts clean.
    for (const auto& p : parameters) p.mutable_grad() = at::Tensor();
    throw OutOfMemoryError("out of memory in the forward/backward pass of a step of " + std::to_string(result.samples) +
                           " samples: " + error_message(e));
  }
  result.loss = loss_sum.item<double>();
  const bool finite_loss = std::isfinite(result.loss);

  // Without loss scaling a finite loss is taken to mean finite gradients: checking every
  // gradient costs a pass over all of them each step. Non-finite weights then show up as a
  // non-finite loss on the next step, which the trainer counts toward max_bad_steps.
  bool found_inf = !finite_loss;
  if (!found_inf && scaler_.enabled()) {
    std::vector<at::Tensor> grads;  // undefined ones (frozen parameters) are skipped by the scaler
    grads.reserve(parameters.size());
    for (const auto& p : parameters) grads.push_back(p.grad());
    found_inf = scaler_.unscale_and_check(grads);
  }
  if (!found_inf && options_.clip_grad_norm > 0) {
    // The norm is computed anyway: a non-finite one skips the step instead of poisoning weights.
    result.grad_norm = torch::nn::utils::clip_grad_norm_(parameters, options_.clip_grad_norm);  // skips undefined grads
    found_inf = !std::isfinite(result.grad_norm);
  }
  if (!found_inf) {
    optimizer_.step();
    result.applied = true;
  } else {
    result.grad_norm = std::nan("");
    result.non_finite = true;
    for (const auto& p : parameters) p.mutable_grad() = at::Tensor();
  }
  scaler_.update(found_inf);
  return result;
}

}  // namespace shoplens
