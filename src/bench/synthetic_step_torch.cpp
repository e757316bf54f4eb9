#include "shoplens/bench/synthetic_step.h"

#include <torch/torch.h>

#include "shoplens/core/errors.h"
#include "shoplens/train/amp.h"
#include "shoplens/train/optimizer.h"

namespace shoplens {

ModelSpec synthetic_model_spec(const SyntheticJobOptions& o) {
  ModelSpec spec;
  spec.name = o.model;
  spec.num_classes = o.num_classes;
  spec.image_size = o.image_size;
  spec.channels_last = o.channels_last;
  if (!is_text_model(o.model)) return spec;
  if (o.text) {
    spec.vocab_size = o.text->vocab_size;
    for (double c : o.text->categorical_cardinalities) spec.categorical_cardinalities.push_back(static_cast<int>(c));
    spec.numeric_fields = o.text->numeric_fields;
    spec.pooling = o.text->pooling;
    spec.attention = o.text->attention;
  } else {
    spec.vocab_size = o.vocab_size;
  }
  spec.max_length = o.seq_len;
  if (spec.vocab_size < 3)
    throw UsageError(o.model + ": the vocabulary size must be at least 3, got " + std::to_string(spec.vocab_size));
  if (spec.max_length < 1)
    throw UsageError(o.model + ": the sequence length must be at least 1, got " + std::to_string(spec.max_length));
  return spec;
}

SyntheticJob::SyntheticJob(const SyntheticJobOptions& o,
                           const std::function<void(Classifier&, TrainStepOptions&)>& customize)
    : cuda(o.cuda) {
  model = make_model(synthetic_model_spec(o));
  model->to(cuda ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU));
  OptimConfig optim_config;
  optim_config.name = o.optimizer;
  optim_config.implementation = o.optimizer_impl;
  optim = std::make_unique<OptimizerSetup>(*model, optim_config);
  TrainStepOptions step_options;
  step_options.precision = o.precision;
  step_options.cuda = cuda;
  step_options.scaler.enabled = step_options.precision == Precision::kFp16;
  if (customize) customize(*model, step_options);  // e.g. the data-parallel reducer
  step = std::make_unique<TrainStep>(*model, optim->optimizer(), step_options);
}

SyntheticJob::~SyntheticJob() = default;

Batch SyntheticJob::batch(int batch_size) const {
  Batch b = model->example_batch(batch_size);
  return cuda ? b.to(torch::kCUDA) : b;
}

}  // namespace shoplens
