#include "trainer_run.h"

#include <torch/torch.h>

#include <cmath>
#include <utility>

#include <spdlog/spdlog.h>

#include "shoplens/core/errors.h"
#include "shoplens/core/runtime.h"
#include "shoplens/data/loader.h"
#include "shoplens/models/classifier.h"
#include "shoplens/train/cuda_graph.h"
#include "shoplens/train/metrics.h"

namespace shoplens {

std::string fmt_metric(double v) { return std::isfinite(v) ? fmt::format("{:.4f}", v) : "nan"; }

TrainerRun::TrainerRun(Config c, std::shared_ptr<Classifier> m, TrainData d, std::filesystem::path dir,
                       std::shared_ptr<ProcessGroup> g, std::string seg)
    : config(std::move(c)),
      model(std::move(m)),
      data(std::move(d)),
      run_dir(std::move(dir)),
      group(std::move(g)),
      segment(std::move(seg)) {
  if (group) {
    rank = group->rank();
    world = group->world_size();
  }
  check_data_and_device();
  setup_train_loader();
  setup_step();
  stages = model->stage_prefixes();
  store = std::make_unique<CheckpointStore>(run_dir / "checkpoints", config.train.keep_last);
  if (is_main()) log = std::make_unique<MetricLog>(run_dir, config.train.tensorboard);
  state.best_metric = metric_name(config.train.early_stopping_metric);
  measure_program();
}

std::unique_ptr<Loader> TrainerRun::make_loader(const std::shared_ptr<const SampleSource>& split,
                                                const LoaderOptions& options) const {
  return make_split_loader(data, split, config, options);
}

// The data matches the model, the device and precision are usable; the model moves there.
void TrainerRun::check_data_and_device() {
  if (!has_samples(data.train)) throw DataError("the train split has no samples");
  if (static_cast<int>(data.class_names.size()) != model->num_classes())
    throw ConfigError("the model has " + std::to_string(model->num_classes()) + " classes, the data " +
                      std::to_string(data.class_names.size()));
  precision = config.train.precision;
  cuda = wants_cuda(config.train.device);
  if (cuda && !cuda_available())
    throw ConfigError("train.device=cuda but this LibTorch has no usable CUDA device (" + torch_version() + ")");
  if (precision == Precision::kFp16 && !cuda)
    throw ConfigError("train.precision=fp16 needs CUDA (CPU autocast supports bf16 only); use bf16 or fp32");
  if (config.train.deterministic) at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/true);
  model->to(cuda ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU));
}

// The training loader, and the steps and schedule its epochs make.
void TrainerRun::setup_train_loader() {
  auto loader_options = loader_options_from_config(config, /*train=*/true);
  if (config.train.class_balance == ClassBalance::kSampler) {
    auto source = data.train;
    const auto seed = static_cast<std::uint64_t>(config.run.seed);
    loader_options.epoch_order = [source, seed](std::int64_t epoch) {
      return balanced_epoch_order(*source, seed, epoch);
    };
  }
  // Every step reads the next global batch of the epoch's order, this rank its share of it, so
  // the order and the position in it do not depend on the world size (exactly-once on resume).
  const int accumulation = config.train.accumulation_steps;
  global_batch = static_cast<std::int64_t>(config.loader.batch_size) * accumulation * world;
  loader_options.global_batch = global_batch;
  loader_options.rank = rank;
  loader_options.world_size = world;
  train_loader = make_loader(data.train, loader_options);
  micro_batches_per_epoch = train_loader->batches_per_epoch();
  steps_per_epoch = micro_batches_per_epoch / accumulation;
  if (steps_per_epoch == 0)
    throw DataError("the train split has " + std::to_string(data.train->size()) +
                    " samples, fewer than one global batch of " + std::to_string(global_batch) +
                    " (micro-batch x accumulation x world size)");
  total_steps = steps_per_epoch * config.train.epochs;
  if (config.train.max_steps > 0) total_steps = std::min(total_steps, config.train.max_steps);
  schedule = std::make_unique<LrSchedule>(config.schedule, steps_per_epoch, total_steps);
}

// The optimizer, the step (precision, class weights, the group) and the weights' EMA.
void TrainerRun::setup_step() {
  optim = std::make_unique<OptimizerSetup>(*model, config.optim);
  if (is_main()) spdlog::info("train: optimizer {}", optim->description());  // which implementation steps
  TrainStepOptions step_options = step_options_from_config(config, precision, cuda);
  if (config.train.class_balance == ClassBalance::kWeightedLoss) {
    auto weights = inverse_frequency_weights(class_counts(*data.train));
    step_options.class_weights = torch::tensor(weights, torch::kFloat);
  }
  step_options.group = group.get();
  step_options.defer_host_reads = true;  // the loop reads the loss at its log steps (single process)
  step_runner = std::make_unique<TrainStep>(*model, optim->optimizer(), step_options);
  if (config.train.ema_decay > 0) ema = std::make_unique<WeightsEma>(*model, config.train.ema_decay);
  if (auto skip = device_skip_for(*optim, cuda, ema != nullptr)) step_runner->set_device_skip(std::move(skip));
  decide_cuda_graph();
}

// train.cuda_graph: on refuses a run that cannot be captured; auto captures a run that can and
// says once, on CUDA, why it does not otherwise.
void TrainerRun::decide_cuda_graph() {
  const auto facts = cuda_graph_facts(config, cuda, model->is_text(), group != nullptr, step_runner->reads_nothing(),
                                      TORCH_VERSION_MAJOR);
  const auto decision = resolve_cuda_graph(config.train.cuda_graph, facts);
  cuda_graph_refusal = decision.reason;
  if (decision.capture) {
    captured_step = std::make_unique<CapturedStep>(*model, step_runner->options(), kCapturedStepWarmup);
    if (is_main())
      spdlog::info("train: steps replayed from a CUDA graph after {} eager warm-up steps", kCapturedStepWarmup);
  } else if (cuda && config.train.cuda_graph == CudaGraphMode::kAuto && is_main()) {
    spdlog::info("train: eager steps (train.cuda_graph=auto): {}", decision.reason);
  }
}

// The program's own footprint (libraries, code), so that the summary can report the job's
// resident peak net of it: what a CPU memory budget covers (docs/FIND_BATCH.md).
void TrainerRun::measure_program() {
  const std::int64_t host_tensors = cuda ? 0 : tensor_bytes(model->parameters()) + tensor_bytes(model->buffers());
  program = measure_program_footprint(host_tensors);
  job_peak_measured = reset_resident_peak();
}

// Head always trains; backbone stages train from the output side as the freeze plan allows.
void TrainerRun::apply_freeze_plan() {
  const int n = trainable_stages(config.train, epoch_progress(), static_cast<int>(stages.size()));
  if (n == trainable) return;
  trainable = n;
  const std::string head = model->head_prefix();
  const int first_trainable = static_cast<int>(stages.size()) - n;
  for (auto& item : model->named_parameters(true)) {
    const std::string& name = item.key();
    bool train = name.rfind(head, 0) == 0;
    if (!train) {
      int stage = 0;  // parameters outside every listed stage belong with the input side
      for (int s = 0; s < static_cast<int>(stages.size()); ++s)
        if (name.rfind(stages[s], 0) == 0) stage = s;
      train = stage >= first_trainable;
    }
    item.value().set_requires_grad(train);
    if (!train) item.value().mutable_grad() = at::Tensor();
  }
  if (config.train.freeze_backbone_epochs > 0 || n < static_cast<int>(stages.size()))
    spdlog::info("train: step {}: {} of {} backbone stages trainable (+ head)", state.step, n, stages.size());
  if (group) rebuild_reducer();
}

// The reducer covers the parameters that train now; every rank rebuilds it at the same step.
void TrainerRun::rebuild_reducer() {
  TrainStepOptions options = step_runner->options();
  std::vector<at::Tensor> trainable_params;
  for (const auto& p : model->parameters())
    if (p.requires_grad()) trainable_params.push_back(p);
  reducer.reset();
  reducer = std::make_unique<GradientReducer>(group, trainable_params,
                                              static_cast<std::int64_t>(config.dist.bucket_mb * 1024 * 1024));
  step_runner->set_reducer(reducer.get());
}

// Replicas start identical: rank 0's parameters and buffers (fresh init, pretrained or resumed).
void TrainerRun::broadcast_model(bool buffers_only) {
  if (!group) return;
  std::vector<at::Tensor> tensors;
  if (!buffers_only)
    for (const auto& p : model->parameters()) tensors.push_back(p.detach());
  for (const auto& b : model->buffers()) tensors.push_back(b.detach());
  if (!tensors.empty()) group->broadcast(tensors, 0);
}

}  // namespace shoplens
