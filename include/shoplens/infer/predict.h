// `shoplens predict` and `shoplens evaluate`: predictions straight from weights (an exported
// folder, a run, a checkpoint, or a .pth/.safetensors with its architecture), BatchNorm in eval
// mode, no training. Inputs are whatever open_score_rows reads (folder tree, CSV, list, one
// image, shards). See docs/SCORING.md.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

#include "shoplens/core/enum_names.h"

#include "shoplens/infer/evaluation.h"
#include "shoplens/infer/inference_session.h"

namespace shoplens {

// What both verbs read: the model, how it computes, and the images and how they are batched.
struct ModelInputOptions {
  ModelSource model;
  InferenceOptions inference;
  std::filesystem::path input;  // what open_score_rows reads (evaluate: it must carry labels)
  std::filesystem::path root;   // CSV or list input: base of relative paths
  std::string split = "all";    // shards input
  int batch_size = 32;
  int workers = 0;  // decode threads (0: usable cores)
};

// The predictions file's format; auto: from the extension of --out (.jsonl or .ndjson: jsonl; csv
// otherwise).
enum class PredictionFormat { kAuto, kCsv, kJsonl };
inline constexpr EnumName<PredictionFormat> kPredictionFormatNames[] = {
    {PredictionFormat::kAuto, "auto"}, {PredictionFormat::kCsv, "csv"}, {PredictionFormat::kJsonl, "jsonl"}};

struct PredictOptions : ModelInputOptions {
  std::filesystem::path out;  // predictions file, written atomically
  PredictionFormat format = PredictionFormat::kAuto;
  int top_k = 5;
  bool logits = false;  // also write the raw logits of every class
};

struct PredictSummary {
  std::size_t rows = 0, rows_ok = 0, rows_error = 0;  // rows_error: rows that could not be read
  std::filesystem::path out;
  PredictionFormat format = PredictionFormat::kCsv;  // what was written (auto resolved)
  std::string input;                                 // what was read
  double images_per_second = 0;
};

// Writes one line per input row (errors included, with their reason).
PredictSummary run_predict(const PredictOptions& options);

struct EvaluateOptions : ModelInputOptions {
  std::filesystem::path out_dir;  // metrics.json, report.html, predictions.csv
  int calibration_bins = 15;
};

// UsageError when the input has no labels. A weights file without class names takes them from
// the input's labels in sorted order (torchvision's ImageFolder class_to_idx). Returns metrics.json.
Evaluation run_evaluate(const EvaluateOptions& options);

}  // namespace shoplens
