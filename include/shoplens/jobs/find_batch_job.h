// `shoplens find-batch` as a job, config in, answer out: the head's class count and the loader's
// rate come from the dataset when the config names one, then find_batch searches with the
// fresh-process check run by the shoplens program (docs/FIND_BATCH.md).
#pragma once

#include <filesystem>

#include "shoplens/batch/find_batch.h"
#include "shoplens/batch/process_fit.h"
#include "shoplens/core/config.h"

namespace shoplens {

struct FindBatchJob {
  Config config;  // resolved
  // The head's classes when neither data.shards nor data.classes says; unless `classes_given`, a
  // text model has 2.
  int classes = 12;
  bool classes_given = false;
  bool use_cache = true;
  // The shoplens program (`/proc/self/exe` of the CLI), which runs the process check's probes.
  std::filesystem::path program;
};

// UsageError for a head of fewer than 2 classes or a text model without a vocabulary.
FindBatchResult run_find_batch_job(FindBatchJob job);

// The child's side of the process check: one probe at `batch` in this fresh process.
ProcessProbe run_process_probe_job(FindBatchJob job, int batch);

}  // namespace shoplens
