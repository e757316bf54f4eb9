#include "shoplens/batch/job_probe.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>

#include "shoplens/batch/memory_probe.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/process_memory.h"
#include "shoplens/core/runtime.h"
#include "shoplens/data/augment.h"
#include "shoplens/data/loader.h"
#include "shoplens/models/classifier.h"
#include "shoplens/train/amp.h"
#include "shoplens/train/optimizer.h"
#include "shoplens/train/train_step.h"

namespace shoplens {

struct JobProbe::Impl {
  Config config;
  int num_classes;
  MemoryProbe& memory;
  bool cuda = false;
  bool pin_inputs = false;  // as the training loader's batches (loader_options_from_config decides)
  Precision precision = Precision::kFp32;
  std::shared_ptr<Classifier> model;
  std::unique_ptr<OptimizerSetup> optim;
  std::unique_ptr<TrainStep> step;
  int image_size = 0;
  bool soft_targets = true;
  std::vector<at::Tensor> ema_copy;
  bool measure_process = false;
  ProgramFootprint program;

  Impl(const Config& c, int classes, MemoryProbe& m) : config(c), num_classes(classes), memory(m) {
    precision = config.train.precision;
    cuda = wants_cuda(config.train.device);
    pin_inputs = loader_options_from_config(config, /*train=*/true).pin_memory;
    if (precision == Precision::kFp16 && !cuda)
      throw ConfigError("train.precision=fp16 needs CUDA (CPU autocast supports bf16 only); use bf16 or fp32");
    // The worst case the loader can produce: largest input, every op on, mixed soft targets.
    const AugmentConfig worst = worst_case_augment(config.augment);
    image_size = worst.image_size;
    soft_targets = uses_soft_targets(worst);

    ModelSpec spec = model_spec_from_config(config, num_classes);
    spec.image_size = image_size;
    model = make_model(spec);
    model->to(device());
    optim = std::make_unique<OptimizerSetup>(*model, config.optim);
    TrainStepOptions options = step_options_from_config(config, precision, cuda);
    if (config.train.class_balance == ClassBalance::kWeightedLoss) options.class_weights = torch::ones({num_classes});
    step = std::make_unique<TrainStep>(*model, optim->optimizer(), options);
    // train.ema_decay keeps a second copy of the weights for the whole run.
    if (config.train.ema_decay > 0) {
      torch::NoGradGuard no_grad;
      for (const auto& p : model->parameters()) ema_copy.push_back(p.detach().clone());
      for (const auto& b : model->buffers()) ema_copy.push_back(b.detach().clone());
    }
    // On CPU the job shares the process with the program itself: its footprint (libraries, code),
    // measured once here, is what each probe's process peak is net of.
    if (!cuda && reset_resident_peak()) {
      program = measure_program_footprint(memory.stats().allocated_bytes);
      measure_process = true;
    }
  }

  torch::Device device() const { return cuda ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU); }

  int loader_batches_held() const {
    if (cuda) return 0;
    const int workers = config.loader.workers > 0 ? config.loader.workers : resolve_threads(config.run.threads);
    return config.loader.prefetch_batches + workers + 2;  // the loader's pool: ring + one per worker + the consumer's
  }

  std::int64_t static_bytes_estimate() const {
    const std::int64_t params = tensor_bytes(model->parameters());
    const double state = config.optim.name == OptimizerKind::kAdamW ? 2.0 : (config.optim.momentum > 0 ? 1.0 : 0.0);
    const double ema = config.train.ema_decay > 0 ? 1.0 : 0.0;
    return static_cast<std::int64_t>(params * (2.0 + state + ema));  // weights + gradients + optimizer state (+ EMA)
  }

  // The worst batch the loader can deliver (largest images with mixed targets, or text at its
  // longest), in host memory as the loader delivers it (pinned for a CUDA step): the step's timing
  // includes the copy to the device, which at a large batch is a real share of a real step.
  Batch synthetic_batch(int batch) const {
    Batch b = model->example_batch(batch);
    if (soft_targets && !model->is_text()) {
      b.targets = torch::softmax(torch::randn({batch, num_classes}), 1);
      b.mixed = true;
    }
    if (pin_inputs && b.images.defined()) b.images = b.images.pin_memory();
    return b;
  }

  // Host buffers the loader keeps in flight: the size of a batch's inputs, contents irrelevant.
  std::vector<at::Tensor> loader_buffers(int batch) const {
    const Batch b = model->example_batch(batch);
    std::vector<at::Tensor> held;
    for (int i = 0; i < loader_batches_held(); ++i)
      for (const at::Tensor& t : {b.images, b.input_ids, b.attention_mask, b.meta_categorical, b.meta_numeric})
        if (t.defined()) held.push_back(i == 0 ? t : torch::empty_like(t));
    return held;
  }

  void synchronize() const {
    // A probe's timing and its memory readings must cover finished work.
    if (cuda) torch::ones({1}, torch::TensorOptions().device(device())).item<float>();
  }

  // Validation runs between steps: weights, gradients and optimizer state stay, the train loader
  // keeps its buffers, and the eval loader adds its own. The memory statistics of that pass.
  MemoryStats evaluation_pass(int batch) {
    const int eval_batch = config.train.eval_batch_size > 0 ? config.train.eval_batch_size : batch;
    memory.reset_peak();
    {
      const std::vector<at::Tensor> eval_held = loader_buffers(eval_batch);
      torch::NoGradGuard no_grad;
      model->eval();
      AutocastScope autocast(cuda, precision);
      auto logits = model->forward_batch(synthetic_batch(eval_batch), device());
      logits.argmax(1).to(torch::kCPU);
      synchronize();
    }
    model->train();
    return memory.stats();
  }

  // The allocator's readings over a probe's steps and its evaluation pass.
  struct StepPeaks {
    std::int64_t max_step = 0, min_steady_step = -1, max_reserved_gap = 0;
    void add(const MemoryStats& st) {
      max_step = std::max(max_step, st.peak_allocated_bytes);
      max_reserved_gap = std::max(max_reserved_gap, st.peak_reserved_bytes - st.peak_allocated_bytes);
    }
  };

  // `steps` training steps at `batch` with the loader's buffers held, then an evaluation pass.
  StepPeaks run_steps(int batch, int steps, std::vector<double>& step_seconds) {
    StepPeaks peaks;
    const std::vector<at::Tensor> held = loader_buffers(batch);  // the training loader's batch buffers (CPU)
    std::vector<Batch> micro{synthetic_batch(batch)};
    for (int s = 0; s < steps; ++s) {
      memory.reset_peak();
      const auto t0 = std::chrono::steady_clock::now();
      step->run(micro);
      synchronize();
      step_seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      const MemoryStats st = memory.stats();
      peaks.add(st);
      // The first step also allocates the optimizer state: steady state starts after it.
      if (s > 0 || steps == 1)
        peaks.min_steady_step = peaks.min_steady_step < 0 ? st.peak_allocated_bytes
                                                          : std::min(peaks.min_steady_step, st.peak_allocated_bytes);
    }
    micro.clear();
    peaks.add(evaluation_pass(batch));
    return peaks;
  }

  void record_failure(const std::exception& e, ProbeResult& r) {
    model->train();
    for (auto& p : model->parameters()) p.mutable_grad() = at::Tensor();
    r.error = error_message(e);
    if (is_out_of_memory(e)) {
      r.outcome = ProbeResult::Outcome::kOutOfMemory;
      // A lower bound of what the batch needs: the refused request on top of what was live (CPU),
      // else the peak the probe reached before the refusal (CUDA's allocator keeps no such figure).
      const MemoryStats at_refusal = memory.stats();
      r.peak_bytes = std::max(at_refusal.last_refused_need_bytes, at_refusal.peak_allocated_bytes);
    } else {
      r.outcome = ProbeResult::Outcome::kFailed;
    }
    // The step drained its failed backward (train_step.h); the blocks it freed go back to the
    // device once the queue has finished with them, so the next probe starts from the job alone.
    synchronize();
    memory.release_cached();
  }

  // Images/s of the median step after the first (which also allocates the optimizer state).
  static double steady_images_per_second(int batch, std::vector<double> step_seconds) {
    if (step_seconds.empty()) return 0;
    if (step_seconds.size() == 1) return batch / step_seconds[0];
    std::vector<double> steady(step_seconds.begin() + 1, step_seconds.end());
    std::nth_element(steady.begin(), steady.begin() + steady.size() / 2, steady.end());
    return batch / steady[steady.size() / 2];
  }

  ProbeResult run(int batch, int steps) {
    ProbeResult r;
    r.batch = batch;
    r.steps = steps;
    const auto start = std::chrono::steady_clock::now();
    memory.release_cached();
    memory.reset_peak();
    if (measure_process) {  // a fresh peak: not what an earlier, larger probe left cached
      release_free_heap();
      reset_resident_peak();
    }
    const MemoryStats at_start = memory.stats();
    r.cached_at_start_bytes = std::max<std::int64_t>(0, at_start.reserved_bytes - at_start.allocated_bytes);
    const std::int64_t retries_before = at_start.alloc_retries;
    std::vector<double> step_seconds;
    try {
      const StepPeaks peaks = run_steps(batch, steps, step_seconds);
      if (measure_process) r.process_peak_bytes = job_resident_peak(program);
      r.peak_bytes = peaks.max_step;
      r.step_spread_bytes = peaks.min_steady_step < 0 ? 0 : peaks.max_step - peaks.min_steady_step;
      r.reserved_gap_bytes = peaks.max_reserved_gap;
      const MemoryStats after = memory.stats();
      r.baseline_bytes = after.allocated_bytes;
      r.inactive_split_bytes = after.inactive_split_bytes;
      r.alloc_retries = after.alloc_retries - retries_before;
      r.outcome = ProbeResult::Outcome::kRan;
    } catch (const std::exception& e) {
      record_failure(e, r);
    }
    r.images_per_second = steady_images_per_second(batch, std::move(step_seconds));
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return r;
  }
};

JobProbe::JobProbe(const Config& config, int num_classes, MemoryProbe& memory)
    : impl_(std::make_unique<Impl>(config, num_classes, memory)) {}
JobProbe::~JobProbe() = default;
ProbeResult JobProbe::run(int batch, int steps) { return impl_->run(batch, steps); }
std::int64_t JobProbe::static_bytes_estimate() const { return impl_->static_bytes_estimate(); }
int JobProbe::loader_batches_held() const { return impl_->loader_batches_held(); }
std::int64_t JobProbe::program_resident_bytes() const { return impl_->measure_process ? impl_->program.resident : 0; }
bool JobProbe::cuda() const { return impl_->cuda; }

}  // namespace shoplens
