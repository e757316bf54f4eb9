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

json EvaluationAccumulator::to_json() const {
  const ClassificationReport report = classification_report(matrix_);
  json j = report_to_json(report, classes_);
  const double n = static_cast<double>(matrix_.total());
  const std::size_t k = std::min<std::size_t>(5, classes_.size());
  j["top5_accuracy"] = n > 0 ? top_k_hits_ / n : 0.0;
  j["top_k"] = k;
  j["nll"] = n > 0 ? nll_sum_ / n : 0.0;
  double ece = 0;
  json bins = json::array();
  for (std::size_t b = 0; b < bins_.size(); ++b) {
    const Bin& bin = bins_[b];
    const double accuracy = bin.count ? static_cast<double>(bin.correct) / bin.count : 0.0;
    const double confidence = bin.count ? bin.confidence_sum / bin.count : 0.0;
    if (n > 0) ece += bin.count / n * std::abs(accuracy - confidence);
    bins.push_back({{"lower", static_cast<double>(b) / bins_.size()},
                    {"upper", static_cast<double>(b + 1) / bins_.size()},
                    {"count", bin.count},
                    {"accuracy", accuracy},
                    {"mean_confidence", confidence}});
  }
  j["ece"] = ece;
  j["calibration_bins"] = bins;
  j["rows"] = {{"evaluated", matrix_.total()},
               {"unreadable", unreadable_},
               {"unlabelled", unlabelled_},
               {"unknown_label", unknown_}};
  json unknown = json::object();
  for (const auto& [name, count] : unknown_labels_) {
    if (unknown.size() >= 20) break;
    unknown[name] = count;
  }
  j["unknown_labels"] = unknown;
  return j;
}

std::string EvaluationAccumulator::summary_line() const {
  const json j = to_json();
  return fmt::format(
      "accuracy {:.4f}, top-{} {:.4f}, macro-F1 {:.4f}, ECE {:.4f} on {} labelled rows ({} unreadable, "
      "{} without a label, {} with a label the model does not know)",
      j["accuracy"].get<double>(), j["top_k"].get<int>(), j["top5_accuracy"].get<double>(), j["macro_f1"].get<double>(),
      j["ece"].get<double>(), matrix_.total(), unreadable_, unlabelled_, unknown_);
}

}  // namespace shoplens
