// Metrics of labelled predictions (evaluation.h).
#include "shoplens/infer/evaluation.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "shoplens/core/errors.h"

namespace shoplens {
using json = nlohmann::json;

EvaluationAccumulator::EvaluationAccumulator(std::vector<std::string> class_names, int calibration_bins)
    : classes_(std::move(class_names)), matrix_(std::max<int>(1, static_cast<int>(classes_.size()))) {
  if (classes_.empty()) throw DataError("evaluation: the model has no classes");
  if (calibration_bins < 1) throw DataError("evaluation: calibration needs at least one bin");
  for (std::size_t c = 0; c < classes_.size(); ++c) index_.emplace(classes_[c], static_cast<int>(c));
  bins_.resize(static_cast<std::size_t>(calibration_bins));
}

void EvaluationAccumulator::add(const std::string& true_label, const std::vector<float>& p) {
  if (p.size() != classes_.size())
    throw DataError(fmt::format("evaluation: {} probabilities for {} classes", p.size(), classes_.size()));
  if (true_label.empty()) {
    ++unlabelled_;
    return;
  }
  const auto known = index_.find(true_label);
  if (known == index_.end()) {
    ++unknown_;
    ++unknown_labels_[true_label];
    return;
  }
  const int truth = known->second;
  const int predicted = static_cast<int>(std::max_element(p.begin(), p.end()) - p.begin());
  matrix_.add(truth, predicted);
  // Top-k: the true class is among the k most probable when fewer than k classes beat it.
  const std::size_t k = std::min<std::size_t>(5, p.size());
  const auto higher =
      static_cast<std::size_t>(std::count_if(p.begin(), p.end(), [&](float v) { return v > p[truth]; }));
  top_k_hits_ += higher < k;
  nll_sum_ -= std::log(std::max(static_cast<double>(p[truth]), 1e-12));
  const double confidence = p[predicted];
  const auto bin = std::min(bins_.size() - 1, static_cast<std::size_t>(confidence * bins_.size()));
  bins_[bin].count += 1;
  bins_[bin].correct += predicted == truth;
  bins_[bin].confidence_sum += confidence;
}

void EvaluationAccumulator::add_unreadable(const std::string& true_label) { ++unreadable_; }

Evaluation EvaluationAccumulator::result() const {
  Evaluation e;
  e.report = classification_report(matrix_);
  e.class_names = classes_;
  const double n = static_cast<double>(matrix_.total());
  e.top_k = static_cast<int>(std::min<std::size_t>(5, classes_.size()));
  e.top_k_accuracy = n > 0 ? top_k_hits_ / n : 0.0;
  e.nll = n > 0 ? nll_sum_ / n : 0.0;
  for (std::size_t b = 0; b < bins_.size(); ++b) {
    const Bin& bin = bins_[b];
    CalibrationBin out;
    out.lower = static_cast<double>(b) / bins_.size();
    out.upper = static_cast<double>(b + 1) / bins_.size();
    out.count = bin.count;
    out.accuracy = bin.count ? static_cast<double>(bin.correct) / bin.count : 0.0;
    out.mean_confidence = bin.count ? bin.confidence_sum / bin.count : 0.0;
    if (n > 0) e.ece += bin.count / n * std::abs(out.accuracy - out.mean_confidence);
    e.calibration.push_back(out);
  }
  e.rows = {matrix_.total(), unreadable_, unlabelled_, unknown_};
  for (const auto& [name, count] : unknown_labels_) {
    if (e.unknown_labels.size() >= 20) break;
    e.unknown_labels[name] = count;
  }
  return e;
}

json Evaluation::to_json() const {
  json j = report_to_json(report, class_names);
  j["top5_accuracy"] = top_k_accuracy;
  j["top_k"] = top_k;
  j["nll"] = nll;
  j["ece"] = ece;
  json bins = json::array();
  for (const auto& b : calibration)
    bins.push_back({{"lower", b.lower},
                    {"upper", b.upper},
                    {"count", b.count},
                    {"accuracy", b.accuracy},
                    {"mean_confidence", b.mean_confidence}});
  j["calibration_bins"] = bins;
  j["rows"] = {{"evaluated", rows.evaluated},
               {"unreadable", rows.unreadable},
               {"unlabelled", rows.unlabelled},
               {"unknown_label", rows.unknown_label}};
  j["unknown_labels"] = unknown_labels;
  if (!model.empty()) {  // a run_evaluate result
    j["model"] = model;
    j["input"] = input;
    j["images_per_second"] = images_per_second;
  }
  return j;
}

std::string Evaluation::summary_line() const {
  return fmt::format(
      "accuracy {:.4f}, top-{} {:.4f}, macro-F1 {:.4f}, ECE {:.4f} on {} labelled rows ({} unreadable, "
      "{} without a label, {} with a label the model does not know)",
      report.accuracy, top_k, top_k_accuracy, report.macro_f1, ece, rows.evaluated, rows.unreadable, rows.unlabelled,
      rows.unknown_label);
}

}  // namespace shoplens
