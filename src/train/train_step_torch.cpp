#include "shoplens/train/train_step.h"

#include <torch/torch.h>
#include <torch/version.h>

#include <cmath>

#include "shoplens/core/errors.h"
#include "shoplens/core/interrupt.h"
#include "shoplens/core/runtime.h"
#include "shoplens/dist/gradient_reducer.h"
#include "shoplens/dist/process_group.h"
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
  o.scaler = {precision == Precision::kFp16, config.train.init_loss_scale, 2.0, 0.5,
              config.train.loss_scale_growth_interval};
  return o;
}

TrainStep::TrainStep(Classifier& model, torch::optim::Optimizer& optimizer, TrainStepOptions options)
    : model_(model), optimizer_(optimizer), options_(std::move(options)), scaler_(options_.scaler) {
  if (options_.precision != Precision::kFp16) scaler_ = LossScaler(LossScalerOptions{});  // scaling is for fp16 only
  // The class weights go to the step's device once: a host-to-device copy in every step's loss
  // would wait for the device (a blocking copy synchronizes) and cannot be captured in a graph.
  if (options_.class_weights.defined())
    options_.class_weights = options_.class_weights.to(options_.cuda ? torch::kCUDA : torch::kCPU, torch::kFloat);
}

void drain_failed_backward(bool cuda) {
  const auto device = cuda ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
  try {
    const auto x = torch::ones({1}, torch::TensorOptions().device(device).requires_grad(true));
    (x * 2).sum().backward();
  } catch (const std::exception& e) {  // no room even for that: the next backward drains them instead
    if (!is_out_of_memory(e)) throw;
  }
}

double HostReads::scalar(const at::Tensor& t, HostRead why) {
  note(why);
  return t.item<double>();
}

at::Tensor HostReads::to_host(const at::Tensor& t, HostRead why) {
  note(why);
  return t.to(torch::kCPU).contiguous();
}

std::int64_t HostReads::total() const {
  std::int64_t sum = 0;
  for (const auto n : counts_) sum += n;
  return sum;
}

at::Tensor clip_grad_norm_on_device(const std::vector<at::Tensor>& parameters, double max_norm) {
  std::vector<at::Tensor> grads;
  for (const auto& p : parameters)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return torch::zeros({}, torch::kFloat);
  torch::NoGradGuard no_grad;
  // The per-gradient norms in multi-tensor launches, as PyTorch's clip_grad_norm_ takes them.
  std::vector<at::Tensor> norms = at::_foreach_norm(grads, 2);
  for (auto& n : norms) n = n.to(torch::kFloat);
  auto total = torch::stack(norms).norm(2);
  // The same coefficient as clip_grad_norm_, clamped instead of branched on: no host read.
  const auto coef = (max_norm / (total + 1e-6)).clamp_max(1.0);
#if TORCH_VERSION_MAJOR >= 2
  at::_foreach_mul_(grads, coef);  // a device scalar: one launch per few tensors, still no read
#else
  for (auto& g : grads) g.mul_(coef.to(g.scalar_type()));
#endif
  return total;
}

namespace {

// What the forward and backward passes of one step left behind on this rank.
struct LocalPasses {
  at::Tensor loss_sum;  // stays on the device: at most one host read per step, not per micro-batch
  bool oom = false;
  std::string oom_message;
};

void drop_gradients(const std::vector<at::Tensor>& parameters) {
  for (const auto& p : parameters) p.mutable_grad() = at::Tensor();
}

// Forward and backward over the micro-batches, gradients accumulating. An out-of-memory error is
// caught and reported (its partial gradients dropped) so that the ranks can agree on a retry.
LocalPasses forward_backward(Classifier& model, const TrainStepOptions& options, LossScaler& scaler,
                             const std::vector<Batch>& micro_batches, std::int64_t samples,
                             const std::vector<at::Tensor>& parameters) {
  const auto device = options.cuda ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
  LocalPasses passes;
  try {
    for (std::size_t i = 0; i < micro_batches.size(); ++i) {
      const auto& batch = micro_batches[i];
      at::Tensor loss;
      {
        AutocastScope autocast(options.cuda, options.precision);
        auto logits = model.forward_batch(batch, device);
        auto losses = per_sample_loss(logits, batch.labels, batch.mixed ? batch.targets : at::Tensor(),
                                      options.class_weights, options.label_smoothing);
        // Dividing by the step's total sample count makes accumulation equal one big batch.
        loss = losses.sum() / static_cast<double>(samples);
      }
      passes.loss_sum = passes.loss_sum.defined() ? passes.loss_sum + loss.detach() : loss.detach();
      // Only the last micro-batch's backward communicates (DDP's no_sync for the others).
      if (options.reducer && i + 1 == micro_batches.size()) options.reducer->arm();
      scaler.scale_loss(loss).backward();
    }
  } catch (const std::exception& e) {
    if (!is_out_of_memory(e)) throw;
    // Nothing of the step was applied: drop its partial gradients and the failed backward's queued
    // work so that a smaller retry starts clean.
    drop_gradients(parameters);
    drain_failed_backward(options.cuda);
    passes.oom = true;
    passes.oom_message = error_message(e);
  }
  return passes;
}

// One small all-reduce carries the step's outcome (loss, samples, non-finite, out of memory, stop);
// every rank then makes the same decision. Returns whether any rank ran out of memory.
bool agree_on_outcome(ProcessGroup& group, StepResult& result, double local_loss, bool local_oom) {
  auto outcome =
      torch::tensor({local_loss * static_cast<double>(result.samples), static_cast<double>(result.samples),
                     std::isfinite(local_loss) ? 0.0 : 1.0, local_oom ? 1.0 : 0.0, result.stop_requested ? 1.0 : 0.0},
                    torch::kDouble);
  std::vector<at::Tensor> tensors{outcome};
  group.allreduce_sum(tensors);
  const auto* o = outcome.data_ptr<double>();
  result.samples = static_cast<std::int64_t>(o[1]);
  result.loss = o[2] > 0 ? std::nan("") : o[0] / std::max(1.0, o[1]);
  result.stop_requested = o[4] > 0;
  return o[3] > 0;
}

}  // namespace

bool TrainStep::defers_reads() const { return options_.defer_host_reads && options_.group == nullptr; }

bool TrainStep::reads_nothing() const { return defers_reads() && options_.device_skip && !scaler_.enabled(); }

StepResult TrainStep::run(const std::vector<Batch>& micro_batches) {
  StepResult result;
  for (const auto& b : micro_batches) result.samples += b.size();
  if (result.samples == 0) throw Error("TrainStep::run: no samples in the step");
  model_.train();
  // Gradients start undefined (PyTorch's set_to_none): backward then writes instead of adding to
  // zeros, and frozen parameters keep no stale gradient for the optimizer to apply.
  const auto parameters = model_.parameters();
  drop_gradients(parameters);
  const LocalPasses passes = forward_backward(model_, options_, scaler_, micro_batches, result.samples, parameters);
  // The other ranks are in (or on their way to) the same collectives: a rank that failed still
  // takes part, so nobody waits for a peer that will never come.
  if (options_.reducer) options_.reducer->finish();
  result.stop_requested = interrupt_requested();
  if (defers_reads() && !passes.oom) {
    apply_or_skip_deferred(result, parameters, passes.loss_sum);
    return result;
  }
  const double local_loss =
      passes.loss_sum.defined() && !passes.oom ? reads_.scalar(passes.loss_sum, HostRead::kLoss) : 0.0;
  const std::int64_t local_samples = result.samples;
  result.loss = local_loss;
  const bool any_oom = options_.group ? agree_on_outcome(*options_.group, result, local_loss, passes.oom) : passes.oom;
  if (any_oom) {
    drop_gradients(parameters);
    throw OutOfMemoryError(passes.oom ? "out of memory in the forward/backward pass of a step of " +
                                            std::to_string(local_samples) + " samples: " + passes.oom_message
                                      : "another rank ran out of memory in this step; every rank retries it smaller");
  }
  result.loss_non_finite = !std::isfinite(result.loss);
  result.loss_value = torch::tensor(result.loss, torch::kDouble);
  apply_or_skip(result, parameters);
  return result;
}

// The deferred step: the loss, the scaler's overflow check and the clipped norm stay on the
// device. The outcome is one read of a three-element flag tensor, or none when the optimizer skips
// on the device. Out of memory never gets here (a single-process step throws before).
void TrainStep::apply_or_skip_deferred(StepResult& result, const std::vector<at::Tensor>& parameters,
                                       const at::Tensor& loss_sum) {
  result.loss_read = false;
  result.loss = std::nan("");
  result.loss_value = loss_sum.detach().to(torch::kDouble).reshape({});
  const auto loss_bad = result.loss_value.isfinite().logical_not();
  auto found_inf = loss_bad;
  if (scaler_.enabled()) {
    std::vector<at::Tensor> grads;
    grads.reserve(parameters.size());
    for (const auto& p : parameters) grads.push_back(p.grad());
    const auto overflow = scaler_.unscale_found_inf(grads);
    if (overflow.defined()) found_inf = found_inf.logical_or(overflow.reshape({}) != 0);
  }
  if (options_.clip_grad_norm > 0) {
    result.grad_norm_value = clip_grad_norm_on_device(parameters, options_.clip_grad_norm);
    found_inf = found_inf.logical_or(result.grad_norm_value.isfinite().logical_not());
  }
  result.found_inf = found_inf;
  if (reads_nothing()) {
    result.outcome_read = false;
    options_.device_skip(found_inf);
    return;
  }
  const auto flags = reads_.to_host(torch::stack({loss_bad, found_inf}), HostRead::kOutcome);
  result.loss_non_finite = flags[0].item<bool>();
  const bool skip = flags[1].item<bool>();
  if (!skip) {
    optimizer_.step();
    result.applied = true;
  } else {
    result.non_finite = true;
    drop_gradients(parameters);
  }
  scaler_.update(skip);
}

// Without loss scaling a finite loss is taken to mean finite gradients: checking every gradient
// costs a pass over all of them each step. Non-finite weights then show up as a non-finite loss on
// the next step, which the trainer counts toward max_bad_steps.
void TrainStep::apply_or_skip(StepResult& result, const std::vector<at::Tensor>& parameters) {
  bool found_inf = !std::isfinite(result.loss);
  if (!found_inf && scaler_.enabled()) {
    std::vector<at::Tensor> grads;  // undefined ones (frozen parameters) are skipped by the scaler
    grads.reserve(parameters.size());
    for (const auto& p : parameters) grads.push_back(p.grad());
    found_inf = scaler_.unscale_and_check(grads);
    reads_.note(HostRead::kLossScaleCheck);
  }
  if (!found_inf && options_.clip_grad_norm > 0) {
    // The norm is computed anyway: a non-finite one skips the step instead of poisoning weights.
    result.grad_norm = torch::nn::utils::clip_grad_norm_(parameters, options_.clip_grad_norm);  // skips undefined grads
    reads_.note(HostRead::kGradNorm);  // its result is a double
    found_inf = !std::isfinite(result.grad_norm);
  }
  if (!found_inf) {
    optimizer_.step();
    result.applied = true;
  } else {
    result.grad_norm = std::nan("");
    result.non_finite = true;
    drop_gradients(parameters);
  }
  scaler_.update(found_inf);
}

}  // namespace shoplens
