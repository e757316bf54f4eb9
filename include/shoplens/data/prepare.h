// `prepare`: decode and validate every image in parallel, quarantine the unreadable ones with
// their reason, resize to the storage size, pack into checksummed shards, and report.
// Every input row is accounted for: kept + quarantined (incl. rejected manifest rows) = total.
// Re-running after an interruption skips shards that are complete and unchanged.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "shoplens/core/config.h"
#include "shoplens/data/manifest.h"
#include "shoplens/data/shard_format.h"

namespace shoplens {

struct PrepareOptions {
  std::filesystem::path input;
  std::filesystem::path out_dir;
  ManifestOptions manifest;
  int storage_size = 256;
  PayloadEncoding encoding = PayloadEncoding::kJpeg;
  int jpeg_quality = 90;
  int records_per_shard = 1024;
  double max_megapixels = 100;
  std::uint64_t max_file_bytes = std::uint64_t{512} << 20;  // larger files are quarantined unread (data.max_file_mb)
  bool scaled_decode = true;
  int threads = 1;
};

PrepareOptions prepare_options_from_config(const Config& config);

struct QuarantinedRow {
  std::string id;
  std::string path;
  std::size_t line = 0;
  std::string stage;  // "manifest" or "decode"
  std::string reason;
};

struct PrepareReport {
  std::size_t total_rows = 0;
  std::size_t kept = 0;
  std::vector<QuarantinedRow> quarantined;
  std::vector<std::string> classes;
  std::vector<std::array<std::uint64_t, 3>> kept_per_class_split;  // [class][split]
  std::vector<std::string> metadata_fields;
  std::vector<std::uint64_t> metadata_missing;  // per field, over kept rows
  std::array<double, 3> mean{0, 0, 0};
  std::array<double, 3> std{0, 0, 0};
  std::vector<std::string> warnings;
  std::size_t extension_mismatches = 0;
  std::size_t jpeg_originals_kept = 0;  // kept JPEGs stored as their original bytes (no resize needed)
  std::size_t shards_written = 0;
  std::size_t shards_reused = 0;
  std::uint64_t input_bytes = 0;
  std::uint64_t output_bytes = 0;
  double seconds = 0;
  std::size_t images_decoded = 0;  // this run (reused shards excluded)
  // Where the splits came from: "input" (a split column or train/val/test folders), "assigned"
  // (seeded per-class hash), or "val_carved_from_train" (the input had train and test, no val).
  std::string split_source = "input";
  std::size_t val_carved_from_train = 0;  // manifest rows moved from train to val
  double val_fraction = 0;
  std::uint64_t split_seed = 0;
};

// UsageError when the input or the output folder is missing, or when the output folder is,
// contains or lies inside the input (core/path_overlap.h). prepare_dataset checks it first; the
// verb calls it before it opens the output folder as its run directory (config.json, the log).
void check_prepare_paths(const PrepareOptions& options);

PrepareReport prepare_dataset(const PrepareOptions& options);

// Human-readable report, written to report.md.
std::string format_prepare_report(const PrepareReport& report);

// The few lines the terminal gets: rows kept and quarantined (by reason), the splits, the time,
// and where the report, the quarantine list and the shards are (`out_dir`).
std::string format_prepare_summary(const PrepareReport& report, const std::filesystem::path& out_dir);

}  // namespace shoplens
