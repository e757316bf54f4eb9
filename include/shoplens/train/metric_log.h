// The run's metric log, in its run directory:
//   metrics.jsonl  one JSON object per record: {"step":..,"epoch":..,"phase":..,<name>:<value>,...}
//   metrics.csv    long format, one row per value: step,epoch,phase,name,value (same columns
//                  whatever the metrics, so runs with different metrics concatenate)
//   events.out.tfevents.*  optional TensorBoard scalars tagged "<phase>/<name>"
// Records are appended and handed to the OS at once (one write per file), so a crash loses at
// most the record being written. Non-finite values become null in JSON and nan/inf/-inf in CSV.
// Not thread-safe: one writer per run.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace shoplens {

class TensorBoardWriter;

class MetricLog {
 public:
  static constexpr const char* kJsonlName = "metrics.jsonl";
  static constexpr const char* kCsvName = "metrics.csv";
  static constexpr const char* kCsvHeader = "step,epoch,phase,name,value";

  // Opens (creating if missing) the files in `run_dir` for appending. A torn last line left by
  // a crash is cut off with a warning, so the next record starts on a line of its own.
  // DataError when an existing metrics.csv has other columns; IoError when a file cannot be
  // opened. A fresh run in a folder that already holds a log should call truncate_after(-1).
  MetricLog(std::filesystem::path run_dir, bool tensorboard);
  ~MetricLog();
  MetricLog(const MetricLog&) = delete;
  MetricLog& operator=(const MetricLog&) = delete;

  // phase: train | val | test. Names must be non-empty, unique in the record, free of control
  // characters and not step/epoch/phase (DataError otherwise, before anything is written).
  void record(std::int64_t step, double epoch, const std::string& phase,
              const std::vector<std::pair<std::string, double>>& values);

  // For a run resumed from a checkpoint taken at `step`: rewrites both files atomically keeping
  // only the records with step <= `step`, so each step appears once. Torn or unreadable lines
  // are dropped with a warning. With TensorBoard on, writes a SessionLog START at step + 1,
  // which makes TensorBoard drop the orphaned tail of earlier event files.
  void truncate_after(std::int64_t step);

  const std::filesystem::path& jsonl_path() const { return jsonl_path_; }
  const std::filesystem::path& csv_path() const { return csv_path_; }
  // Null without TensorBoard.
  const TensorBoardWriter* tensorboard() const { return tensorboard_.get(); }

 private:
  void open_files();
  void close_files();

  std::filesystem::path run_dir_;
  std::filesystem::path jsonl_path_;
  std::filesystem::path csv_path_;
  int jsonl_fd_ = -1;
  int csv_fd_ = -1;
  std::unique_ptr<TensorBoardWriter> tensorboard_;
};

}  // namespace shoplens
