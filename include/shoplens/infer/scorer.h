// `shoplens score`: a batch scoring job over an exported model (docs/SCORING.md). Rows are cut
// into chunks; each chunk's predictions are written atomically, so a killed job resumes at the
// first missing chunk and the final predictions.csv holds every input row exactly once. Rows that
// cannot be read or decoded become error rows with the reason, never a failed job.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <opencv2/core/mat.hpp>

#include "shoplens/core/precision.h"
#include "shoplens/data/image_io.h"
#include "shoplens/infer/score_shard.h"

namespace shoplens {

// The rows to score, predict or evaluate, read by one opener (open_score_rows):
//   - a folder of prepared shards (it holds dataset.json): every split, or one; labels from it
//   - a folder tree: ImageFolder (one subfolder per class, labels from the folder names) or a
//     flat folder of images (no labels); files are taken in sorted order, as torchvision does
//   - a CSV file (.csv): column `path` (or file, filepath), optional `label` (or class,
//     category) and `id`
//   - a list file (.txt, .lst): one image path per line
//   - one image file
// Relative paths in a CSV or list resolve against `root` (default: the file's own folder).
// A CSV or list file is read as a stream and only a window of its rows is held (load_window), so
// memory does not grow with the input; shards answer from their memory-mapped index; a folder's
// sorted listing is held (its file names).
class ScoreRows {
 public:
  virtual ~ScoreRows() = default;
  virtual std::size_t size() const = 0;
  virtual std::string id(std::size_t row) const = 0;
  // The row's true label, "" when the input has none for it.
  virtual std::string label(std::size_t row) const { return ""; }
  // True when the input carries labels (a labelled CSV, a class-folder tree, shards).
  virtual bool has_labels() const { return false; }
  // The row's image, decoded to RGB (CV_8UC3); DataError with the reason when it cannot be.
  virtual cv::Mat image(std::size_t row) const = 0;
  virtual std::string describe() const = 0;  // for the job fingerprint and messages
  // What the row's prediction depends on in the input, for the row fingerprints of score's
  // chunks: a file row's id, the file it names (resolved against the root) and why the row itself
  // is malformed; a shard sample's split, id, size and dimensions.
  virtual std::string identity(std::size_t row) const { return id(row); }
  // Makes rows [begin, end) the ones the accessors above answer for (an input read as a stream
  // holds only these; another row is std::out_of_range). Reads on from the last window, or from
  // the start again for an earlier row; DataError when the input no longer has the rows it had
  // when opened. Callers keep windows small (kRowWindow rows) and never call it while workers
  // read rows. Inputs held whole ignore it.
  virtual void load_window(std::size_t begin, std::size_t end) {}
};

struct RowsOptions {
  std::string split = "all";   // shards: all | train | val | test
  DecodeOptions decode;        // how image files are decoded (inference: InferenceSession's)
  std::filesystem::path root;  // CSV and list files: base of relative paths (empty: the file's folder)
};

// UsageError for a missing input or an unknown split; DataError for an input without rows.
std::unique_ptr<ScoreRows> open_score_rows(const std::filesystem::path& input, const RowsOptions& options);

struct ScoreOptions {
  std::filesystem::path model_dir;
  std::filesystem::path input;
  std::filesystem::path out_dir;
  std::string split = "all";               // shards: all | train | val | test
  std::filesystem::path root;              // CSV or list input: base of relative paths (empty: the file's folder)
  bool fast_decode = false;                // JPEG: fast DCT at reduced scale (not Pillow's pixels; faster)
  std::string variant = "fp32";            // which weights file of the model folder to load
  Precision precision = Precision::kFp32;  // compute: bf16, fp16 (CUDA)
  DeviceChoice device = DeviceChoice::kAuto;
  int batch_size = 64;
  double max_latency_ms = 0;  // > 0: the largest batch whose measured p95 fits
  int max_batch = 256;        // upper end of that search
  int workers = 0;            // decode threads (0: usable cores)
  int chunk_rows = 1024;
  int drift_sample = 64;      // reduced precision: rows compared against fp32 first
  double price_per_hour = 0;  // device price, for cost per million images (0: not reported)
  // Or the price from a table row (configs/prices.json): per device, i.e. the instance's price
  // divided by its accelerators, since one job uses one device.
  std::filesystem::path prices;
  std::string instance;
  std::string price_basis = "on-demand";  // on-demand | spot
  // Which shard of the input this process scores (score_shard.h): --shard I/N, --shard-count, or
  // the launcher's environment read through `environment`. A shard of N > 1 writes into
  // out_dir/shard-IIIII-of-NNNNN/; `shoplens score merge` joins the shards.
  ShardRequest shard;
  EnvLookup environment = [](const char* name) -> const char* { return std::getenv(name); };
};

// Runs (or resumes) the job; returns report.json's content (also written). InterruptedError
// after SIGINT/SIGTERM: completed chunks stay, the chunk in flight is redone on resume.
nlohmann::json run_score_job(const ScoreOptions& options);

// What a shard of the job would score, without a model: the input's rows, the shard's range and
// the fingerprint of its rows (the one score records and checks on resume). Reads the input as a
// stream, a window at a time, as score does; for planning and for checking a manifest.
nlohmann::json plan_score_shard(const ScoreOptions& options);

}  // namespace shoplens
