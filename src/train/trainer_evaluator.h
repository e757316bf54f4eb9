// The trainer's evaluator (private to src/train): scores a split with the current (or EMA)
// weights, halving the batch after running out of memory; with a process group each rank scores
// every world-th sample and the tallies are merged; validation keeps the best-metric and patience
// bookkeeping and writes the val records of the metric log and the history.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "shoplens/train/binary_metrics.h"
#include "shoplens/train/metrics.h"
#include "trainer_run.h"

namespace shoplens {

struct EvalResult {
  ClassificationReport report;
  std::optional<BinaryMetrics> binary;  // two-class tasks: ranking metrics of the class-1 scores
  double loss = 0;
  double seconds = 0;
};

// What an evaluation has counted so far (one rank's share until merged).
struct EvalTally {
  explicit EvalTally(int classes) : confusion(classes) {}
  ConfusionMatrix confusion;
  std::vector<double> scores;  // two classes: the probability of class 1, with its label
  std::vector<int> score_labels;
  double loss_sum = 0;
  std::int64_t samples = 0;
};

// The tally's counts as the numbers the ranks sum: the confusion matrix, the loss sum, the samples
// and the stop flag (1 when this rank saw an interrupt).
std::vector<double> pack_tally(const EvalTally& tally, bool interrupted);
// The summed numbers back into `tally` (its scores untouched); returns whether any rank saw an
// interrupt.
bool unpack_tally(EvalTally& tally, const std::vector<double>& totals);
// The result of a whole split's tally (metrics, mean loss).
EvalResult eval_result(const EvalTally& tally, double threshold, double seconds);

// An evaluation's record in the history and summary.json.
nlohmann::json eval_record(const EvalResult& r, const std::string& phase, const std::vector<std::string>& class_names,
                           std::int64_t step, double epoch);
// An evaluation's values in the metric log; `raw`: with EMA, the raw weights' scores beside them.
std::vector<std::pair<std::string, double>> eval_log_values(const EvalResult& r, const EvalResult* raw,
                                                            double train_seconds);
// Best-metric and patience bookkeeping of one validation whose early-stopping metric is `value`;
// returns whether it is the best so far (the first always is; a non-finite value never after).
bool record_validation(TrainState& state, double value, bool higher_is_better);

class Evaluator {
 public:
  explicit Evaluator(TrainerRun& run) : run_(run) {}
  // Scores `source` with the model's current weights; `what` names it in the log.
  EvalResult evaluate(const std::shared_ptr<const SampleSource>& source, const std::string& what);
  // Evaluates with the EMA weights swapped in when EMA is on (the log line says so).
  EvalResult evaluate_ema(const std::shared_ptr<const SampleSource>& source, const std::string& what);
  // Validation + early-stopping bookkeeping; returns true when the current weights are the best.
  bool validate();
  void log_eval(const EvalResult& r, const std::string& phase, const EvalResult* raw = nullptr);
  nlohmann::json record(const EvalResult& r, const std::string& phase) const;

 private:
  EvalResult evaluate_at(const std::shared_ptr<const SampleSource>& source, const std::string& what, int batch);
  void tally_batch(EvalTally& tally, const Batch& batch);
  void merge_ranks(EvalTally& tally, std::size_t split_size);
  void gather_scores(std::size_t split_size, std::vector<double>& scores, std::vector<int>& labels);

  TrainerRun& run_;
  int eval_batch_limit_ = 0;  // set after an evaluation ran out of memory
};

}  // namespace shoplens
