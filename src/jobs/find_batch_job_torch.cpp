#include "shoplens/jobs/find_batch_job.h"

#include <optional>
#include <string>

#include "shoplens/core/errors.h"
#include "shoplens/dist/dist_env.h"
#include "shoplens/jobs/train_job.h"
#include "shoplens/models/model_facts.h"

namespace shoplens {
namespace {

// The head's class count, and the dataset when the config names one: it sizes the head (and a
// text dataset the model's shape, as `train` resolves it), and its loader's rate caps the plan.
int resolve_classes(FindBatchJob& job, std::optional<TrainData>& data) {
  Config& config = job.config;
  int classes = job.classes;
  if (is_text_model(config.model.name) && !job.classes_given) classes = 2;  // text tasks are binary unless told
  if (!config.data.classes.empty()) classes = static_cast<int>(config.data.classes.size());
  if (!config.data.shards.empty()) {
    data = open_train_data(config);
    classes = static_cast<int>(data->class_names.size());
  }
  if (is_text_model(config.model.name) && config.text.vocab_size < 3)
    throw UsageError(
        "find-batch: " + config.model.name +
        " needs a vocabulary: give --shards TEXT_DATASET, or --set text.vocab_size=N for synthetic tokens");
  if (classes < 2) throw UsageError("find-batch: the head needs at least 2 classes, got " + std::to_string(classes));
  return classes;
}

}  // namespace

FindBatchResult run_find_batch_job(FindBatchJob job) {
  std::optional<TrainData> data;
  const int classes = resolve_classes(job, data);
  // The same cap as `train -b auto` (one process here): the same question, so the same cache entry.
  if (data) cap_batch_search_at_samples(job.config, data->train->size(), /*world_size=*/1, "find-batch");
  const double input_rate = data ? plan_input_rate(job.config, *data, DistEnv{}) : 0.0;
  ProbeFolder folder;
  return find_batch(job.config, classes, job.use_cache, input_rate,
                    spawn_process_probe(job.program, job.config, classes, folder));
}

ProcessProbe run_process_probe_job(FindBatchJob job, int batch) {
  std::optional<TrainData> data;
  const int classes = resolve_classes(job, data);
  return probe_this_process(job.config, classes, batch);
}

}  // namespace shoplens
