// `predict` and `evaluate` (predict.h): rows through the inference core, written as they come.
#include "shoplens/infer/predict.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "batch_inference.h"
#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/interrupt.h"
#include "shoplens/core/path_overlap.h"
#include "shoplens/core/plural.h"
#include "shoplens/core/progress.h"
#include "shoplens/core/strings.h"
#include "shoplens/data/csv.h"
#include "shoplens/infer/evaluation.h"

namespace shoplens {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::vector<std::pair<int, float>> most_probable(const std::vector<float>& probs, int k) {
  std::vector<int> order(probs.size());
  std::iota(order.begin(), order.end(), 0);
  const auto kept = static_cast<std::size_t>(std::min<std::size_t>(std::max(k, 1), probs.size()));
  std::partial_sort(order.begin(), order.begin() + kept, order.end(),
                    [&](int a, int b) { return probs[a] > probs[b] || (probs[a] == probs[b] && a < b); });
  std::vector<std::pair<int, float>> top;
  for (std::size_t i = 0; i < kept; ++i) top.emplace_back(order[i], probs[order[i]]);
  return top;
}

// One line per row, CSV or JSON Lines, streamed into a temporary that becomes `out` on commit().
class PredictionWriter {
 public:
  PredictionWriter(const fs::path& out, bool jsonl, std::vector<std::string> classes, int top_k, bool logits,
                   bool labelled)
      : file_(out),
        jsonl_(jsonl),
        classes_(std::move(classes)),
        top_k_(std::min<int>(top_k, classes_.size())),
        logits_(logits),
        labelled_(labelled) {
    if (!jsonl_) put(csv_line(header()) + "\n");
  }

  void write(const RowResult& r, const ScoreRows& rows) {
    const auto top = r.ok ? most_probable(r.probs, top_k_) : std::vector<std::pair<int, float>>{};
    put(jsonl_ ? json_line(r, rows, top) : csv_row(r, rows, top));
  }
  void commit() { file_.commit(); }

 private:
  void put(const std::string& s) { file_.write(s.data(), s.size()); }

  std::vector<std::string> header() const {
    std::vector<std::string> h{"row", "id"};
    if (labelled_) h.push_back("true_label");
    for (const char* c : {"status", "prediction", "confidence"}) h.push_back(c);
    for (int i = 1; i <= top_k_; ++i) {
      h.push_back(fmt::format("top{}", i));
      h.push_back(fmt::format("p_top{}", i));
    }
    if (logits_)
      for (const auto& c : classes_) h.push_back("logit_" + c);
    h.push_back("error");
    return h;
  }

  std::string csv_row(const RowResult& r, const ScoreRows& rows, const std::vector<std::pair<int, float>>& top) const {
    std::vector<std::string> f{std::to_string(r.row), rows.id(r.row)};
    if (labelled_) f.push_back(rows.label(r.row));
    f.push_back(r.ok ? "ok" : "error");
    f.push_back(r.ok ? classes_.at(top[0].first) : "");
    f.push_back(r.ok ? fmt::format("{:.6f}", top[0].second) : "");
    for (int i = 0; i < top_k_; ++i) {
      f.push_back(r.ok ? classes_.at(top[i].first) : "");
      f.push_back(r.ok ? fmt::format("{:.6f}", top[i].second) : "");
    }
    if (logits_)
      for (std::size_t c = 0; c < classes_.size(); ++c) f.push_back(r.ok ? fmt::format("{:.6g}", r.logits.at(c)) : "");
    f.push_back(r.error);
    return csv_line(f) + "\n";
  }

  std::string json_line(const RowResult& r, const ScoreRows& rows,
                        const std::vector<std::pair<int, float>>& top) const {
    json j = {{"row", r.row}, {"id", rows.id(r.row)}, {"status", r.ok ? "ok" : "error"}};
    if (labelled_) j["true_label"] = rows.label(r.row);
    if (!r.ok) j["error"] = r.error;
    if (r.ok) {
      j["prediction"] = classes_.at(top[0].first);
      j["confidence"] = top[0].second;
      json t = json::array();
      for (const auto& [c, p] : top) t.push_back({{"label", classes_.at(c)}, {"probability", p}});
      j["top"] = t;
      if (logits_) j["logits"] = r.logits;
    }
    // Replace, not throw, on bytes that are not UTF-8 (a file name from another system).
    return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  }

  AtomicFileWriter file_;
  bool jsonl_;
  std::vector<std::string> classes_;
  int top_k_;
  bool logits_, labelled_;
};

struct RunCounts {
  std::size_t rows = 0, ok = 0, errors = 0;
  double images_per_second = 0;
};

// Every row through the model, a window of kRowWindow rows at a time (only those rows and their
// results are held), each result handed to `sink` in row order.
RunCounts for_each_result(InferenceSession& session, ScoreRows& rows, int batch, int workers, bool logits,
                          const std::function<void(const RowResult&)>& sink) {
  if (batch < 1) throw UsageError("--batch-size must be >= 1");
  BatchInference runner(session, rows, workers, logits);
  BatchTimings timing;
  Progress progress("predict", rows.size(), "img");
  RunCounts counts;
  for_each_window(rows, 0, rows.size(), [&](std::size_t begin, std::size_t end) {
    const auto results = runner.run_range(begin, end, batch, timing);
    if (interrupt_requested() || results.size() != end - begin) throw InterruptedError();
    for (const auto& r : results) {
      sink(r);
      ++(r.ok ? counts.ok : counts.errors);
    }
    progress.advance(end - begin);
  });
  progress.finish();
  counts.rows = rows.size();
  counts.images_per_second = timing.wall_seconds > 0 ? timing.images / timing.wall_seconds : 0.0;
  return counts;
}

PredictionFormat resolved_format(const PredictOptions& o) {
  if (o.format != PredictionFormat::kAuto) return o.format;
  const std::string ext = to_lower(o.out.extension().string());
  return ext == ".jsonl" || ext == ".ndjson" ? PredictionFormat::kJsonl : PredictionFormat::kCsv;
}

std::unique_ptr<ScoreRows> open_rows(const fs::path& input, const fs::path& root, const std::string& split,
                                     const DecodeOptions& decode) {
  RowsOptions ro;
  ro.split = split;
  ro.root = root;
  ro.decode = decode;
  return open_score_rows(input, ro);
}

}  // namespace

PredictSummary run_predict(const PredictOptions& o) {
  if (o.out.empty()) throw UsageError("predict: --out FILE is required");
  if (o.top_k < 1) throw UsageError("predict: --top-k must be >= 1");
  require_output_apart({"--out", o.out}, {{"--input", o.input}, {"--weights", o.model.path}});
  const PredictionFormat format = resolved_format(o);
  const bool jsonl = format == PredictionFormat::kJsonl;
  InferenceSession session(load_model_source(o.model), o.inference);
  const auto rows = open_rows(o.input, o.root, o.split, session.decode_options());
  if (!o.out.parent_path().empty()) fs::create_directories(o.out.parent_path());
  PredictionWriter writer(o.out, jsonl, session.class_names(), o.top_k, o.logits, rows->has_labels());
  const RunCounts counts = for_each_result(session, *rows, o.batch_size, o.workers, o.logits,
                                           [&](const RowResult& r) { writer.write(r, *rows); });
  writer.commit();
  spdlog::info("predict: {} ({} could not be read) -> {}", count_of(static_cast<std::int64_t>(counts.rows), "row"),
               counts.errors, o.out.string());
  PredictSummary summary;
  summary.rows = counts.rows;
  summary.rows_ok = counts.ok;
  summary.rows_error = counts.errors;
  summary.out = o.out;
  summary.format = format;
  summary.input = rows->describe();
  summary.images_per_second = counts.images_per_second;
  return summary;
}

Evaluation run_evaluate(const EvaluateOptions& o) {
  if (o.out_dir.empty()) throw UsageError("evaluate: --out OUT_DIR is required");
  require_output_apart({"--out", o.out_dir}, {{"--input", o.input}, {"--weights", o.model.path}});
  ModelSource source = o.model;
  if (model_source_kind(source.path) == ModelSourceKind::kWeightsFile && source.class_names.empty()) {
    // A bare weights file knows no class names: the input's labels in sorted order name its
    // outputs, as torchvision's ImageFolder numbers its class folders.
    const auto listing = open_rows(o.input, o.root, o.split, DecodeOptions{});
    std::set<std::string> labels;
    for_each_window(*listing, 0, listing->size(), [&](std::size_t begin, std::size_t end) {
      for (std::size_t r = begin; r < end; ++r)
        if (!listing->label(r).empty()) labels.insert(listing->label(r));
    });
    source.class_names.assign(labels.begin(), labels.end());
    spdlog::info("evaluate: class names from the input's labels, sorted: {}", fmt::join(source.class_names, ", "));
  }
  InferenceSession session(load_model_source(source), o.inference);
  const auto rows = open_rows(o.input, o.root, o.split, session.decode_options());
  if (!rows->has_labels())
    throw UsageError("evaluate: " + rows->describe() +
                     " carries no labels (use class folders, a CSV with a label column, "
                     "or shards); for predictions alone use `shoplens predict`");
  fs::create_directories(o.out_dir);
  EvaluationAccumulator metrics(session.class_names(), o.calibration_bins);
  PredictionWriter writer(o.out_dir / "predictions.csv", false, session.class_names(), 5, false, true);
  const RunCounts counts = for_each_result(session, *rows, o.batch_size, o.workers, false, [&](const RowResult& r) {
    writer.write(r, *rows);
    if (r.ok)
      metrics.add(rows->label(r.row), r.probs);
    else
      metrics.add_unreadable(rows->label(r.row));
  });
  writer.commit();
  if (metrics.evaluated() == 0)
    throw DataError("evaluate: no row could be evaluated (" + metrics.summary_line() + "); predictions.csv says why");
  Evaluation result = metrics.result();
  result.model = o.model.path.string();
  result.input = rows->describe();
  result.images_per_second = counts.images_per_second;
  const json doc = result.to_json();
  write_file_atomic(o.out_dir / "metrics.json", doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
  write_file_atomic(o.out_dir / "report.html",
                    evaluation_report_html(doc, "Evaluation of " + o.model.path.string() + " on " + rows->describe()));
  spdlog::info("evaluate: {}", result.summary_line());
  return result;
}

}  // namespace shoplens
