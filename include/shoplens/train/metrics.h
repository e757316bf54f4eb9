// Classification metrics from a confusion matrix: the numbers validation reports, early stopping
// watches and docs/TRAINING.md defines.
//
// Conventions are scikit-learn's (precision_recall_fscore_support / classification_report) with
// labels = every class that occurs in the true labels OR in the predictions, and zero_division=0:
//   precision_c = tp_c / predicted_c, 0 when the class was never predicted;
//   recall_c    = tp_c / support_c,   0 when the class never occurs in the labels;
//   f1_c        = 2 tp_c / (support_c + predicted_c)  (= 2PR/(P+R)), 0 when tp_c = 0;
//   macro_*     = unweighted mean over the present classes only (a class that is neither in the
//                 labels nor in the predictions does not count, as sklearn does not see it);
//   weighted_f1 = sum_c f1_c * support_c / samples (absent or unlabelled classes weigh 0);
//   accuracy    = trace / samples.
// An empty matrix (no samples) reports 0 everywhere rather than NaN.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace shoplens {

class ConfusionMatrix {
 public:
  // DataError unless num_classes >= 1.
  explicit ConfusionMatrix(int num_classes);

  // DataError when a label or prediction is outside [0, num_classes).
  void add(std::int64_t label, std::int64_t predicted);
  // `count` samples of that (label, prediction) pair at once (merging totals from other ranks).
  void add(std::int64_t label, std::int64_t predicted, std::int64_t count);
  // Checks the whole batch before counting any of it, so a bad batch leaves the matrix unchanged.
  void add_batch(const std::int64_t* labels, const std::int64_t* predicted, std::size_t n);
  // Adds another matrix of the same size (e.g. from another worker). DataError on a size mismatch.
  void merge(const ConfusionMatrix& other);

  // num_classes x num_classes, row-major: row = true label, column = prediction.
  const std::vector<std::int64_t>& counts() const { return counts_; }
  std::int64_t at(int label, int predicted) const {
    return counts_[static_cast<std::size_t>(label) * num_classes_ + predicted];
  }
  std::int64_t total() const { return total_; }
  int num_classes() const { return num_classes_; }

 private:
  int num_classes_;
  std::int64_t total_ = 0;
  std::vector<std::int64_t> counts_;
};

struct ClassMetrics {
  double precision = 0, recall = 0, f1 = 0;
  std::int64_t support = 0;    // samples whose true label is this class
  std::int64_t predicted = 0;  // samples predicted as this class
};

struct ClassificationReport {
  std::int64_t samples = 0;
  double accuracy = 0, macro_precision = 0, macro_recall = 0, macro_f1 = 0, weighted_f1 = 0;
  std::vector<ClassMetrics> per_class;  // one per class, absent classes included (all zeros)
  std::vector<std::int64_t> confusion;  // copy of ConfusionMatrix::counts()
  int num_classes = 0;
};

ClassificationReport classification_report(const ConfusionMatrix& matrix);

// class_names: one per class, or empty for "0", "1", ... (DataError on any other size).
// JSON: samples, accuracy, macro_*, weighted_f1, classes, per_class [{name, precision, recall,
// f1, support, predicted}], confusion (array of rows, row = true label).
nlohmann::json report_to_json(const ClassificationReport& report, const std::vector<std::string>& class_names);
// A Markdown per-class table, the averages and the confusion matrix, for people.
std::string report_to_markdown(const ClassificationReport& report, const std::vector<std::string>& class_names);

// The metrics early stopping and checkpoint selection can watch, in the order `--help` lists them:
// loss, accuracy, macro_f1, weighted_f1, macro_precision, macro_recall, roc_auc, pr_auc (the last
// two rank the class-1 scores of a two-class task: binary_metrics.h).
std::vector<std::string> metric_names();
// ConfigError naming the nearest metric on an unknown name.
bool metric_higher_is_better(const std::string& name);
struct BinaryMetrics;
// `loss` is passed through (the report has no loss); roc_auc and pr_auc come from `binary`
// (ConfigError without it); the others from the report.
double metric_value(const ClassificationReport& report, double loss, const std::string& name,
                    const BinaryMetrics* binary = nullptr);

}  // namespace shoplens
