#include "shoplens/train/metrics.h"

#include "shoplens/train/binary_metrics.h"

#include <algorithm>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "shoplens/core/errors.h"
#include "shoplens/core/strings.h"

namespace shoplens {
namespace {

// zero_division=0, as in the header.
double ratio(double num, double den) { return den > 0 ? num / den : 0.0; }

std::vector<std::string> resolved_names(const std::vector<std::string>& names, int num_classes) {
  if (names.empty()) return numbered_names(num_classes);
  if (names.size() != static_cast<std::size_t>(num_classes))
    throw DataError(fmt::format("{} class names for a report of {} classes", names.size(), num_classes));
  return names;
}

// Markdown table cells: a '|' in a class name would split the cell.
std::string cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += '\\';
    out += (c == '\n' || c == '\r') ? ' ' : c;
  }
  return out;
}

}  // namespace

ConfusionMatrix::ConfusionMatrix(int num_classes) : num_classes_(num_classes) {
  if (num_classes < 1) throw DataError(fmt::format("a confusion matrix needs at least one class, got {}", num_classes));
  counts_.assign(static_cast<std::size_t>(num_classes) * num_classes, 0);
}

void ConfusionMatrix::add(std::int64_t label, std::int64_t predicted) { add_batch(&label, &predicted, 1); }

void ConfusionMatrix::add(std::int64_t label, std::int64_t predicted, std::int64_t count) {
  if (count < 0) throw DataError(fmt::format("negative count {} for ({}, {})", count, label, predicted));
  if (count == 0) return;
  add_batch(&label, &predicted, 1);  // validates the pair
  counts_[static_cast<std::size_t>(label * num_classes_ + predicted)] += count - 1;
  total_ += count - 1;
}

void ConfusionMatrix::add_batch(const std::int64_t* labels, const std::int64_t* predicted, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    if (labels[i] < 0 || labels[i] >= num_classes_)
      throw DataError(fmt::format("label {} (sample {} of the batch) is outside [0, {})", labels[i], i, num_classes_));
    if (predicted[i] < 0 || predicted[i] >= num_classes_)
      throw DataError(
          fmt::format("prediction {} (sample {} of the batch) is outside [0, {})", predicted[i], i, num_classes_));
  }
  for (std::size_t i = 0; i < n; ++i) ++counts_[static_cast<std::size_t>(labels[i] * num_classes_ + predicted[i])];
  total_ += static_cast<std::int64_t>(n);
}

void ConfusionMatrix::merge(const ConfusionMatrix& other) {
  if (other.num_classes_ != num_classes_)
    throw DataError(
        fmt::format("cannot merge a {}-class confusion matrix into a {}-class one", other.num_classes_, num_classes_));
  for (std::size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
  total_ += other.total_;
}

ClassificationReport classification_report(const ConfusionMatrix& matrix) {
  const int k = matrix.num_classes();
  ClassificationReport r;
  r.num_classes = k;
  r.samples = matrix.total();
  r.confusion = matrix.counts();
  r.per_class.resize(static_cast<std::size_t>(k));

  std::int64_t correct = 0;
  for (int t = 0; t < k; ++t) {
    for (int p = 0; p < k; ++p) {
      r.per_class[t].support += matrix.at(t, p);
      r.per_class[p].predicted += matrix.at(t, p);
    }
    correct += matrix.at(t, t);
  }

  int present = 0;
  double weighted_f1_sum = 0;
  for (int c = 0; c < k; ++c) {
    ClassMetrics& m = r.per_class[c];
    const double tp = static_cast<double>(matrix.at(c, c));
    m.precision = ratio(tp, static_cast<double>(m.predicted));
    m.recall = ratio(tp, static_cast<double>(m.support));
    m.f1 = ratio(2 * tp, static_cast<double>(m.support + m.predicted));
    weighted_f1_sum += m.f1 * static_cast<double>(m.support);
    // sklearn only knows the classes it sees in y_true or y_pred.
    if (m.support == 0 && m.predicted == 0) continue;
    ++present;
    r.macro_precision += m.precision;
    r.macro_recall += m.recall;
    r.macro_f1 += m.f1;
  }
  if (present > 0) {
    r.macro_precision /= present;
    r.macro_recall /= present;
    r.macro_f1 /= present;
  }
  r.accuracy = ratio(static_cast<double>(correct), static_cast<double>(r.samples));
  r.weighted_f1 = ratio(weighted_f1_sum, static_cast<double>(r.samples));
  return r;
}

nlohmann::json report_to_json(const ClassificationReport& report, const std::vector<std::string>& class_names) {
  const auto names = resolved_names(class_names, report.num_classes);
  nlohmann::json per_class = nlohmann::json::array();
  for (int c = 0; c < report.num_classes; ++c) {
    const auto& m = report.per_class[c];
    per_class.push_back({{"name", names[c]},
                         {"precision", m.precision},
                         {"recall", m.recall},
                         {"f1", m.f1},
                         {"support", m.support},
                         {"predicted", m.predicted}});
  }
  nlohmann::json confusion = nlohmann::json::array();
  for (int t = 0; t < report.num_classes; ++t) {
    auto row_begin = report.confusion.begin() + static_cast<std::ptrdiff_t>(t) * report.num_classes;
    confusion.push_back(std::vector<std::int64_t>(row_begin, row_begin + report.num_classes));
  }
  return {{"samples", report.samples},
          {"accuracy", report.accuracy},
          {"macro_precision", report.macro_precision},
          {"macro_recall", report.macro_recall},
          {"macro_f1", report.macro_f1},
          {"weighted_f1", report.weighted_f1},
          {"classes", names},
          {"per_class", std::move(per_class)},
          {"confusion", std::move(confusion)}};
}

std::string report_to_markdown(const ClassificationReport& report, const std::vector<std::string>& class_names) {
  const auto names = resolved_names(class_names, report.num_classes);
  std::string out;
  out += fmt::format("{} samples, accuracy {:.4f}, macro F1 {:.4f}, weighted F1 {:.4f}\n\n", report.samples,
                     report.accuracy, report.macro_f1, report.weighted_f1);
  out += "| class | precision | recall | F1 | support | predicted |\n";
  out += "|---|---:|---:|---:|---:|---:|\n";
  for (int c = 0; c < report.num_classes; ++c) {
    const auto& m = report.per_class[c];
    out += fmt::format("| {} | {:.4f} | {:.4f} | {:.4f} | {} | {} |\n", cell(names[c]), m.precision, m.recall, m.f1,
                       m.support, m.predicted);
  }
  out += fmt::format("| **macro average** | {:.4f} | {:.4f} | {:.4f} | {} | |\n", report.macro_precision,
                     report.macro_recall, report.macro_f1, report.samples);
  out += fmt::format("| **weighted average** | | | {:.4f} | {} | |\n", report.weighted_f1, report.samples);
  out += "\nConfusion matrix (rows: true label, columns: prediction)\n\n";
  out += "| true \\ predicted |";
  for (const auto& name : names) out += " " + cell(name) + " |";
  out += "\n|---|";
  for (int c = 0; c < report.num_classes; ++c) out += "---:|";
  out += "\n";
  for (int t = 0; t < report.num_classes; ++t) {
    out += "| " + cell(names[t]) + " |";
    for (int p = 0; p < report.num_classes; ++p)
      out += fmt::format(" {} |", report.confusion[static_cast<std::size_t>(t) * report.num_classes + p]);
    out += "\n";
  }
  return out;
}

std::vector<std::string> metric_names() {
  return {"loss", "accuracy", "macro_f1", "weighted_f1", "macro_precision", "macro_recall", "roc_auc", "pr_auc"};
}

namespace {

void check_metric_name(const std::string& name) {
  const auto names = metric_names();
  if (std::find(names.begin(), names.end(), name) == names.end())
    throw ConfigError("unknown metric '" + name + "'" + did_you_mean(name, names) + "; known: " + join(names, ", "));
}

}  // namespace

bool metric_higher_is_better(const std::string& name) {
  check_metric_name(name);
  return name != "loss";
}

double metric_value(const ClassificationReport& report, double loss, const std::string& name,
                    const BinaryMetrics* binary) {
  check_metric_name(name);
  if (name == "roc_auc" || name == "pr_auc") {
    if (!binary)
      throw ConfigError("metric " + name + " ranks the scores of a two-class task; this task has " +
                        std::to_string(report.num_classes) + " classes: use macro_f1, accuracy or loss");
    return name == "roc_auc" ? binary->roc_auc : binary->pr_auc;
  }
  if (name == "loss") return loss;
  if (name == "accuracy") return report.accuracy;
  if (name == "macro_f1") return report.macro_f1;
  if (name == "weighted_f1") return report.weighted_f1;
  if (name == "macro_precision") return report.macro_precision;
  return report.macro_recall;
}

}  // namespace shoplens
