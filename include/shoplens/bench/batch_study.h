// `shoplens bench --study batch` (docs/BENCH.md): trains a baseline (micro-batch 32) and the
// find-batch configuration on the same shards for the same epochs, the learning rate scaled for
// the larger batch, and writes a self-contained report.html (inline SVG, no network) comparing
// throughput, memory, stability and validation macro-F1. Plain C++: both runs are real
// `shoplens train` processes, so the study measures exactly what users run; the report is built
// from their summary.json, metrics.jsonl and find_batch.json.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace shoplens {

struct BatchStudyOptions {
  std::string train_config;     // optional train config (empty: defaults)
  std::string shards;           // prepared shards
  std::filesystem::path out;
  int epochs = 3;
  int baseline_batch = 32;
  std::string memory_budget = "2GiB";  // what find-batch fits into (both runs run under it)
  int threads = 0;
  std::vector<std::string> sets;  // extra --set overrides for both runs
};

// What one training run left behind, read back.
struct StudyRun {
  std::string label;
  nlohmann::json summary;
  double lr = 0;
  int micro_batch = 0;
  std::vector<std::pair<double, double>> train_loss;  // (epoch, loss)
  std::vector<std::pair<double, double>> val_f1;      // (epoch, macro-F1)
  int loss_spikes = 0;
  double final_val_f1 = 0;
};

// Reads a run directory (DataError when summary.json or metrics.jsonl is missing or unreadable).
StudyRun read_study_run(const std::filesystem::path& run_dir, const std::string& label);
// A train record whose loss exceeds 1.5x the median of the previous five train records.
int count_loss_spikes(const std::vector<std::pair<double, double>>& loss);

// The whole report: XHTML (also well-formed XML), inline SVG charts, tables and the trade-offs
// in words. `find_batch` is the candidate run's find_batch.json (probes and the memory fit).
std::string batch_study_html(const StudyRun& baseline, const StudyRun& candidate, const nlohmann::json& find_batch,
                             const BatchStudyOptions& options);

// Runs both trainings (`shoplens_binary train ...`) and writes DIR/report.html and
// DIR/study.json; returns the report path. Error when a run fails (its log is named).
std::filesystem::path run_batch_study(const BatchStudyOptions& options, const std::string& shoplens_binary);

}  // namespace shoplens
