// `shoplens bench --study batch` (docs/BENCH.md): for each of several seeds, trains a baseline
// (micro-batch 32) and the find-batch plan (its micro-batch, the learning rate scaled by the
// plan's rule) on the same shards for the same epochs, then compares them over the seeds: macro-F1
// mean and spread, the paired difference against the 1-point goal, training time to the
// baseline's F1, throughput and memory. Writes study.json and a self-contained report.html
// (inline SVG, no network). Plain C++: each run is a real `shoplens train` process (own peak
// memory, exactly what users run); the report is built from the runs' files.
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace shoplens {

struct BatchStudyOptions {
  std::string train_config;  // optional train config (empty: defaults)
  std::string shards;        // prepared shards
  std::filesystem::path out;
  int epochs = 3;
  int baseline_batch = 32;
  std::string memory_budget = "2GiB";  // what find-batch fits into (both runs run under it)
  int threads = 0;
  int seeds = 3;  // paired runs: seeds first_seed .. first_seed + seeds - 1
  std::int64_t first_seed = 1;
  std::vector<std::string> sets;  // extra --set overrides for both runs
};

// What one training run left behind, read back.
// NOLINTNEXTLINE(bugprone-exception-escape): its implicit moves move a json, which does not throw
struct StudyRun {
  std::string label;
  std::int64_t seed = 0;
  nlohmann::json summary;
  double lr = 0;
  int micro_batch = 0;
  std::vector<std::pair<double, double>> train_loss;  // (epoch, loss)
  std::vector<std::pair<double, double>> val_f1;      // (epoch, macro-F1)
  std::vector<std::pair<double, double>> val_loss;    // (epoch, validation loss): one point per validation
  std::vector<double> val_seconds;                    // training seconds at each validation (NaN: not recorded)
  int loss_spikes = 0;
  double final_val_f1 = 0;
};

// The seeds taken together. F1 figures are fractions; differences are in points (x100).
struct StudySummary {
  int seeds = 0;
  double baseline_f1_mean = 0, baseline_f1_sd = 0, candidate_f1_mean = 0, candidate_f1_sd = 0;
  double f1_difference_mean_points = 0, f1_difference_sd_points = 0;  // candidate - baseline, paired by seed
  // Throughput, one definition everywhere (table, text, study.json, terminal): each arm's mean
  // training images/s over the seeds that measured one, and their ratio (candidate / baseline).
  // The per-seed ratios are shown as they are, never averaged into a second "speed-up".
  double baseline_images_per_second = NAN, candidate_images_per_second = NAN;
  double throughput_ratio = NAN;
  std::vector<double> per_seed_throughput_ratios;  // NaN for a seed whose baseline measured none
  // Per seed: training seconds until validation macro-F1 first reached the baseline's final F1
  // minus the goal's point (NaN: never within the run).
  std::vector<double> baseline_seconds_to_f1, candidate_seconds_to_f1;
  bool goal_met = false;  // mean difference no worse than -1 point
};

// Reads a run directory (DataError when summary.json or metrics.jsonl is missing or unreadable).
StudyRun read_study_run(const std::filesystem::path& run_dir, const std::string& label);
// A train record whose loss exceeds 1.5x the median of the previous five train records.
int count_loss_spikes(const std::vector<std::pair<double, double>>& loss);
// Training seconds at the first validation whose macro-F1 reached `target` (NaN: none did).
double seconds_to_reach(const StudyRun& run, double target);
// Pairs baseline[i] with candidate[i] (same seed); both non-empty and of equal length.
StudySummary summarize_study(const std::vector<StudyRun>& baseline, const std::vector<StudyRun>& candidate);

// The whole report: XHTML (also well-formed XML), inline SVG charts, tables and the trade-offs
// in words. `find_batch` is a candidate run's find_batch.json (probes and the memory fit).
std::string batch_study_html(const std::vector<StudyRun>& baseline, const std::vector<StudyRun>& candidate,
                             const nlohmann::json& find_batch, const BatchStudyOptions& options);

// The verdict in one line, for the terminal: the goal met or not (the mean macro-F1 difference) and
// the throughput ratio, as the report states them.
std::string study_verdict(const StudySummary& summary);

struct BatchStudyResult {
  std::filesystem::path report, study_json;
  StudySummary summary;
};

// Runs the trainings (`shoplens_binary train ...`, no shell) and writes DIR/report.html and
// DIR/study.json. Error when a run fails (its log is named).
BatchStudyResult run_batch_study(const BatchStudyOptions& options, const std::string& shoplens_binary);

}  // namespace shoplens
