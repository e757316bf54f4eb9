// `shoplens find-batch`: the largest micro-batch of the configured training job that fits the
// device's memory budget, found by probing the real step, then the accumulation and learning
// rate that reach a target global batch, as a config patch. Results are cached by fingerprint.
// Method and output fields: docs/FIND_BATCH.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shoplens/batch/batch_search.h"
#include "shoplens/batch/process_fit.h"
#include "shoplens/core/config.h"

namespace shoplens {

class ProcessGroup;

// How a micro-batch limit becomes the job's batch settings.
struct BatchPlan {
  int micro_batch = 0;
  int accumulation_steps = 1;
  int world_size = 1;
  std::int64_t global_batch = 0;     // micro x accumulation x world size
  std::int64_t reference_batch = 0;  // what optim.lr was tuned for
  std::string lr_scaling = "sqrt";   // the rule applied (find_batch.lr_scaling "auto" resolved)
  double lr = 0;                     // scaled for global_batch
  double lr_factor = 1;
  double warmup_epochs = 0;  // at least 1 when the lr was scaled up (Goyal et al.)
  double speedup = 1;        // measured images/s at micro_batch over the reference batch's (1: unknown)
  int epochs = 0;            // find_batch.train_budget time: train.epochs x speedup (0: unchanged)
  std::vector<std::string> notes;
};

// The largest micro-batch <= max_micro that reaches `target_global` exactly (micro x k x world),
// fewest accumulation steps first; without a target, one micro-batch per rank and step. When no
// exact split exists the global batch is rounded up and a note says so.
// The global batch optim.lr was tuned for: find_batch.reference_batch, else loader.batch_size x
// train.accumulation_steps.
std::int64_t reference_global_batch(const Config& config);
BatchPlan plan_batch(int max_micro, std::int64_t target_global, int world_size, const Config& config);

// The settings a plan gives the job: what `train` applies for loader.batch_size auto. find-batch's
// JSON shows them as `config_patch`, in the config's own keys, so a user can paste them.
struct PlannedSettings {
  int micro_batch = 0;            // loader.batch_size
  int accumulation_steps = 1;     // train.accumulation_steps
  int eval_batch = 0;             // train.eval_batch_size
  double lr = 0;                  // optim.lr
  double warmup_epochs = 0;       // schedule.warmup_epochs
  int epochs = 0;                 // train.epochs (0: unchanged)
  std::int64_t token_budget = 0;  // text models: loader.token_budget (0: unchanged)
};
// `token_budget` > 0 for text models.
PlannedSettings planned_settings(const BatchPlan& plan, int eval_batch, std::int64_t token_budget = 0);
// {"loader": {"batch_size"}, "train": {"accumulation_steps", "eval_batch_size"}, "optim": {"lr"}, ...}.
nlohmann::json config_patch_json(const PlannedSettings& settings);
// The settings back from a `config_patch` another process wrote (a child find-batch, another
// rank), each field checked; DataError naming `where` and the key.
PlannedSettings planned_settings_from_json(const nlohmann::json& patch, const std::string& where);
// What `train` does with batch_size "auto": the job runs the plan's settings.
void apply_planned_settings(Config& config, const PlannedSettings& settings);
// find_batch.train_budget time: a plan measured `speedup` times faster than the reference batch
// trains train.epochs x speedup epochs (rounded), about the wall time the reference batch would
// have taken: a larger batch at equal epochs takes fewer optimizer steps and loses accuracy (the
// GPU study: -2 to -8 points of macro-F1 at 2x images/s). Notes what it did.
void budget_epochs_by_time(BatchPlan& plan, double speedup, const Config& config);

nlohmann::json search_to_json(const SearchResult& search);

struct FindBatchResult {
  nlohmann::json search;               // search_to_json, plus device, model, fingerprint: what the cache keeps
  int micro_batch = 0;                 // the answer after rounding and verification: the largest that fits
  int throughput_batch = 0;            // objective throughput: the knee of measured images/s (0: not measured)
  double input_images_per_second = 0;  // the loader's measured rate that capped the step's (0: not measured)
  int eval_batch = 0;
  // Text models: the probes' sequence length (text.max_length) and micro_batch x it, the
  // loader.token_budget that is always safe; 0 for image models.
  int sequence_length = 0;
  std::int64_t token_budget = 0;
  BatchPlan plan;
  bool from_cache = false;
  double total_seconds = 0;  // this call (a cache hit costs almost nothing)
  PlannedSettings settings() const { return planned_settings(plan, eval_batch, token_budget); }
  nlohmann::json to_json() const;  // the --format json document
  std::string to_table() const;    // for people
};

// What decides the answer: model, classes, input size, augmentation footprint, precision,
// optimizer, loader buffering, device and its memory, LibTorch version, budget, search settings.
std::string find_batch_fingerprint(const Config& config, int num_classes, const std::string& device_name,
                                   std::int64_t device_total_bytes, std::int64_t budget_bytes);
std::filesystem::path find_batch_cache_dir(const Config& config);
std::optional<nlohmann::json> read_cached_search(const Config& config, const std::string& fingerprint);
void write_cached_search(const Config& config, const std::string& fingerprint, const nlohmann::json& search);

// A micro-batch larger than a rank's share of the training samples cannot run one full step:
// lowers find_batch.max_batch to that share and logs it, naming `who` ("train", "bench: NAME").
// Nothing changes when the cap is already at or below it.
void cap_batch_search_at_samples(Config& config, std::size_t train_samples, int world_size, const std::string& who);

// Data-parallel `loader.batch_size: auto`: each rank searched its own device, and the answers can
// differ (a card with less free memory, noise at the edge). Every rank must train the same plan (the
// global batch, the learning rate and the sampler's shards depend on it), and a plan that fits the
// tightest card fits them all: returns the find-batch document to apply on this rank, `found` with
// the plan (`config_patch`, `micro_batch`, `notes`) of the rank whose planned micro-batch is smallest
// (the lowest such rank), and `rank_agreement` saying what every rank found. Collective: every rank
// of `group` calls it.
nlohmann::json agree_on_found_batch(ProcessGroup& group, const nlohmann::json& found);

// Runs the search on this machine's device (or answers from the cache when allowed).
// `num_classes` sizes the head; the data itself is not read (inputs are synthetic, worst case).
// `input_images_per_second` > 0 (measure_input_rate on the job's data): with objective throughput
// the plan counts no batch's images/s above it, since training cannot outrun its loader.
// `process_probe` (spawn_process_probe): on CPU with train.memory_budget and
// find_batch.process_check, the answer is lowered until a fresh process at it fits the budget.
FindBatchResult find_batch(const Config& config, int num_classes, bool use_cache, double input_images_per_second = 0,
                           const ProcessProbeFn& process_probe = {});

}  // namespace shoplens
