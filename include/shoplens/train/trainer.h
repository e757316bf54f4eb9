// The training job: epochs of TrainStep over the train split with the schedule, freeze plan,
// evaluation, early stopping, checkpoints and resume; leaves metrics, logs and summary.json in
// the run directory (docs/TRAINING.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shoplens/core/config.h"
#include "shoplens/data/sample_source.h"
#include "shoplens/train/checkpoint.h"

namespace shoplens {

class Classifier;
class ProcessGroup;
class BatchBuilder;
class Loader;
struct LoaderOptions;

// Builds the batches of one split for a loader with these options (train or eval).
using BatchBuilderFactory = std::function<std::shared_ptr<BatchBuilder>(
    const std::shared_ptr<const SampleSource>& split, const LoaderOptions& options)>;

struct TrainData {
  std::shared_ptr<const SampleSource> train;
  std::shared_ptr<const SampleSource> val;   // null or empty: no evaluation, last weights are "best"
  std::shared_ptr<const SampleSource> test;  // null or empty: no final test
  std::vector<std::string> class_names;
  // Unset: the splits are ImageSources, read by the image loader with config.augment.
  BatchBuilderFactory make_builder;
};

// Per-class counts of a split (reads labels through the source, no decoding).
std::vector<std::int64_t> class_counts(const SampleSource& source);
// weight_c = N / (K x N_c) over the classes present; absent classes get 0.
std::vector<double> inverse_frequency_weights(const std::vector<std::int64_t>& counts);
// A class-balanced epoch: `size` draws with replacement, each class equally likely, a function of
// (seed, epoch) only.
std::vector<std::uint32_t> balanced_epoch_order(const SampleSource& source, std::uint64_t seed, std::int64_t epoch);

// The loader over one split of `data`: the text builder when data.make_builder is set, else the
// image loader with config.augment.
std::unique_ptr<Loader> make_split_loader(const TrainData& data, const std::shared_ptr<const SampleSource>& split,
                                          const Config& config, const LoaderOptions& options);

// Images (or rows) per second the training loader delivers with this config (workers,
// augmentation, batch size) when nothing consumes slower: read for about `seconds` once the
// workers have started and the prefetch ring has been drained, over as many epochs as that takes
// (at most kMaxInputRateEpochs). 0 samples/s when the first epoch is all warm-up. The ceiling on
// any training step's images/s.
struct InputRate {
  double samples_per_second = 0;
  double seconds = 0;  // the timed window
  int epochs = 0;      // epochs the window touched
};
constexpr int kMaxInputRateEpochs = 64;
InputRate measure_input_rate(const TrainData& data, const Config& config, double seconds);

class Trainer {
 public:
  // `model` is built for config.model with data.class_names classes (pretrained weights already
  // loaded, if any). Checkpoints go to run_dir/checkpoints.
  // With `group` (data-parallel, docs/DISTRIBUTED.md) every rank constructs a Trainer over the
  // same data: each step reads its share of the global batch, gradients are averaged, metrics
  // are computed over the whole validation set, and rank 0 alone writes the run's artifacts.
  // `segment` names this start of the job in the sample ledger (dist.ledger).
  Trainer(Config config, std::shared_ptr<Classifier> model, TrainData data, std::filesystem::path run_dir,
          std::shared_ptr<ProcessGroup> group = nullptr, std::string segment = "");
  ~Trainer();

  // Restores model, optimizer, loss scaler, RNG, data position and history from `checkpoint`.
  // ConfigError when it does not fit (different model or classes).
  void resume(const Checkpoint& checkpoint);
  // Trains to the end (epochs, max_steps or early stopping), evaluates the test split with the
  // best weights and returns summary.json's content (also written). SIGINT/SIGTERM: finishes the
  // step, writes a checkpoint and throws InterruptedError.
  nlohmann::json fit();
  // Called after every committed step with the step number (fault injection in tests).
  void set_after_step(std::function<void(std::int64_t)> hook);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace shoplens
