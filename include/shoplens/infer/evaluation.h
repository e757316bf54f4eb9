// Metrics of a labelled prediction run, for `evaluate` and for `score` on a labelled input:
// accuracy, top-5, macro-F1 and the per-class table (train/metrics.h conventions: scikit-learn's),
// the confusion matrix, negative log-likelihood, and calibration: the expected calibration error
// over equal-width confidence bins (Guo et al. 2017; 15 bins by default) with its reliability
// table. Rows that cannot count are counted apart, never dropped silently: unreadable images,
// rows without a label, and labels the model does not know.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shoplens/train/metrics.h"

namespace shoplens {

struct CalibrationBin {
  double lower = 0, upper = 0;  // confidence range
  std::int64_t count = 0;
  double accuracy = 0, mean_confidence = 0;
};

// Rows that could not count are counted apart, never dropped.
struct EvaluationRows {
  std::int64_t evaluated = 0, unreadable = 0, unlabelled = 0, unknown_label = 0;
};

// The metrics of one labelled run, as a result: verbs print from it, to_json() is metrics.json.
struct Evaluation {
  ClassificationReport report;  // samples, accuracy, macro/weighted F1, per class, confusion
  std::vector<std::string> class_names;
  int top_k = 5;  // min(5, classes)
  double top_k_accuracy = 0;
  double nll = 0;
  double ece = 0;
  std::vector<CalibrationBin> calibration;
  EvaluationRows rows;
  std::map<std::string, std::int64_t> unknown_labels;  // up to 20 names with their counts
  // Set by run_evaluate: what was evaluated on what, and how fast ("" and 0 elsewhere).
  std::string model, input;
  double images_per_second = 0;

  // samples, accuracy, top5_accuracy, top_k, macro/weighted F1, per_class, confusion, nll, ece,
  // calibration_bins, rows {evaluated, unreadable, unlabelled, unknown_label}, unknown_labels
  // (and model, input, images_per_second when set).
  nlohmann::json to_json() const;
  // One line for the log: accuracy, top-5, macro-F1, ECE and the row counts.
  std::string summary_line() const;
};

class EvaluationAccumulator {
 public:
  // DataError unless there is at least one class and bins >= 1.
  explicit EvaluationAccumulator(std::vector<std::string> class_names, int calibration_bins = 15);

  // One scored row: its true label (a class name; "" when the row has none) and the model's
  // probabilities, one per class (DataError on another count).
  void add(const std::string& true_label, const std::vector<float>& probabilities);
  // A row whose image could not be read or decoded.
  void add_unreadable(const std::string& true_label);

  std::int64_t evaluated() const { return matrix_.total(); }
  Evaluation result() const;
  nlohmann::json to_json() const { return result().to_json(); }
  std::string summary_line() const { return result().summary_line(); }

 private:
  std::vector<std::string> classes_;
  std::map<std::string, int> index_;
  ConfusionMatrix matrix_;
  std::int64_t top_k_hits_ = 0, unreadable_ = 0, unlabelled_ = 0, unknown_ = 0;
  double nll_sum_ = 0;
  std::map<std::string, std::int64_t> unknown_labels_;
  struct Bin {
    std::int64_t count = 0, correct = 0;
    double confidence_sum = 0;
  };
  std::vector<Bin> bins_;
};

// A self-contained HTML page (no scripts, no external files) of to_json()'s metrics: the
// headline numbers, the per-class table, the confusion matrix drawn as a heat map (shade =
// share of the true class's rows) and the reliability diagram. `title` is escaped.
std::string evaluation_report_html(const nlohmann::json& metrics, const std::string& title);

}  // namespace shoplens
