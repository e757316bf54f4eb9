// The batch-size search, independent of what a probe is: it sees only "run the job at batch b
// and tell me its peak memory (or that it ran out)". The real probe is the training step
// (job_probe.h); tests drive it with fake memory curves. Method: docs/FIND_BATCH.md.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "shoplens/batch/find_batch_options.h"

namespace shoplens {

struct ProbeResult {
  enum class Outcome { kRan, kOutOfMemory, kFailed };
  int batch = 0;
  Outcome outcome = Outcome::kRan;
  std::int64_t peak_bytes = 0;             // peak allocated over the probe's steps and evaluation;
                                           // on OOM, what was needed at the refusal (a lower bound) or 0
  std::int64_t reserved_gap_bytes = 0;     // peak reserved - peak allocated (CUDA cache, fragmentation)
  std::int64_t cached_at_start_bytes = 0;  // reserved - allocated when the probe started, its cache just
                                           // emptied: blocks an earlier (failed) probe left that could not
                                           // be released yet; part of reserved_gap_bytes, not this batch's
  std::int64_t step_spread_bytes = 0;      // max - min of the per-step peaks: steady-state noise
  std::int64_t inactive_split_bytes = 0;   // CUDA: fragmentation left after the probe
  std::int64_t alloc_retries = 0;          // CUDA: allocations that had to free the cache first (during the probe)
  std::int64_t process_peak_bytes = 0;     // CPU: the job's resident peak over the probe (tensors and what
                                           // oneDNN, decoders and the allocator hold beside them), net of the
                                           // program's own footprint; reported, not planned on (it also holds
                                           // earlier probes' cached primitives). 0: not measured (CUDA, no clear_refs)
  std::int64_t baseline_bytes = 0;         // live after the steps with the batch freed: weights,
                                           // gradients, optimizer state (a lower bound of the static part)
  int steps = 0;
  double seconds = 0;
  double images_per_second = 0;  // training throughput in the probe (after its first step)
  std::string error;             // kOutOfMemory / kFailed: the message
  bool fits = false;             // set by the search: ran and peak within the usable budget
  bool for_throughput = false;   // run to measure images/s for the plan, not to search memory
};

using ProbeFn = std::function<ProbeResult(int batch)>;

struct SearchOptions {
  SearchStrategy strategy = SearchStrategy::kFit;
  std::int64_t budget_bytes = 0;    // > 0
  double headroom_fraction = 0.02;  // kept free at least (fit); measured noise can raise it
  int first_batch = 2;
  int max_batch = 4096;
  int granularity = 1;             // find_batch.round_to: probes land on its multiples (from it up), so the answer
                                   // needs no rounding and no probe of its own to verify it
  int max_probes = 16;             // fit: cap, including a bisection fallback
  double tolerance = 0.01;         // bisection stops when hi - lo <= max(1, tolerance x lo)
  double binsearch_margin = 0.05;  // binsearch: Lightning's final margin
  int binsearch_max_trials = 25;   // binsearch: Lightning's max_trials
  std::string input_size_key = "augment.image_size";  // named when batch 1 does not fit (text: text.max_length)
};

struct MemoryFit {
  double static_bytes = 0;
  double bytes_per_sample = 0;
  double r2 = 0;  // 1 with two points
  int points = 0;
  double predict(double batch) const { return static_bytes + bytes_per_sample * batch; }
  // Largest batch whose prediction is within `bytes` (0 when none).
  int largest_within(double bytes, int max_batch) const;
};

// Least squares over (batch, peak) points; needs two distinct batches (points = 0 otherwise).
MemoryFit fit_memory(const std::vector<std::pair<double, double>>& points);

struct SearchResult {
  int batch = 0;  // the answer: 0 when nothing fits
  std::int64_t budget_bytes = 0;
  std::int64_t headroom_bytes = 0;
  std::int64_t usable_bytes = 0;          // budget - headroom
  std::int64_t predicted_peak_bytes = 0;  // the fit at `batch`
  std::int64_t measured_peak_bytes = 0;   // the probe at `batch`
  MemoryFit fit;
  std::vector<ProbeResult> probes;  // in the order they ran
  std::vector<std::string> warnings;
  bool bisected = false;  // the model missed and the search bisected
  double seconds = 0;
  const ProbeResult* probe_at(int batch) const;
};

// Runs the chosen strategy. Throws Error when batch 1 does not fit (with the memory it needed),
// and when a probe fails for a reason other than memory (never mistaken for an OOM).
SearchResult search_batch(const ProbeFn& probe, const SearchOptions& options);

// Batches whose throughput the plan compares: the recipe's (reference) batch and its doublings
// below `largest`, then `largest` (only `largest` when the reference does not fit).
std::vector<int> throughput_ladder(int reference, int largest);
// A larger batch trains fewer optimizer steps per epoch; it is worth that only when it is clearly
// faster. Walks `ladder` (throughput_ladder) from its first batch, where rates[i] is ladder[i]'s
// images/s (0: not measured), and moves up while the next rung's rate beats the current one's by
// `min_gain` per doubling (pro rata for the last, partial step); returns where it stopped. The
// ladder's last batch when its first was never measured.
int throughput_knee(const std::vector<double>& rates, const std::vector<int>& ladder, double min_gain);
// Each rate capped at `input_rate` (> 0; 0 leaves them): training cannot run faster than its loader
// delivers images, so a batch whose steps outrun it is no faster than one that just keeps up.
std::vector<double> cap_rates(std::vector<double> rates, double input_rate);
// The last fitting probe's images/s at each batch of `ladder` (0 where none ran).
std::vector<double> ladder_rates(const std::vector<ProbeResult>& probes, const std::vector<int>& ladder);

}  // namespace shoplens
