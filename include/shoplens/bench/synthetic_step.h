// The benchmarks' training job on synthetic input: a model, its optimizer and the trainer's real
// TrainStep, with the worst-case batch the model itself describes (Classifier::example_batch:
// images at image_size, or text at max_length with every token real). `bench-train` and `bench`
// (synthetic scenarios) both measure this, so their figures agree by construction.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "shoplens/bench/synthetic_workload.h"
#include "shoplens/core/config.h"
#include "shoplens/data/batch.h"
#include "shoplens/models/classifier.h"
#include "shoplens/train/train_step.h"

namespace shoplens {

class OptimizerSetup;

struct SyntheticJobOptions : SyntheticWorkload {
  bool cuda = false;
  // Text models over a real dataset: its shape (text.* resolved from text_dataset.json) instead of
  // vocab_size; no metadata fields otherwise.
  const TextConfig* text = nullptr;
};

// The spec the options build (seq_len becomes max_length for text models).
ModelSpec synthetic_model_spec(const SyntheticJobOptions& options);

struct SyntheticJob {
  SyntheticJob(const SyntheticJobOptions& options,
               const std::function<void(Classifier&, TrainStepOptions&)>& customize = nullptr);
  ~SyntheticJob();
  // The model's worst-case batch of `batch_size` rows, on the job's device.
  Batch batch(int batch_size) const;
  bool is_text() const { return model->is_text(); }
  int seq_len() const { return model->spec().max_length; }

  std::shared_ptr<Classifier> model;
  std::unique_ptr<OptimizerSetup> optim;
  std::unique_ptr<TrainStep> step;
  bool cuda = false;
};

}  // namespace shoplens
