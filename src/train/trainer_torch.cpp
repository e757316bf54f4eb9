#include "shoplens/train/trainer.h"

#include <chrono>

#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/random.h"
#include "run_summary.h"
#include "train_loop.h"
#include "trainer_checkpoints.h"
#include "trainer_evaluator.h"
#include "trainer_run.h"

// The trainer is four units over one TrainerRun (trainer_run.h): the evaluator, the checkpoints,
// the loop and the run summary; Trainer::Impl owns them and runs fit in that order.
namespace shoplens {
namespace fs = std::filesystem;
using json = nlohmann::json;

std::vector<std::int64_t> class_counts(const SampleSource& source) {
  std::vector<std::int64_t> counts(source.num_classes(), 0);
  for (std::size_t i = 0; i < source.size(); ++i) {
    const int label = source.label(i);
    if (label < 0 || label >= source.num_classes())
      throw DataError("sample " + std::to_string(i) + " has label " + std::to_string(label) + " outside [0, " +
                      std::to_string(source.num_classes()) + ")");
    counts[label]++;
  }
  return counts;
}

std::vector<double> inverse_frequency_weights(const std::vector<std::int64_t>& counts) {
  std::int64_t total = 0, present = 0;
  for (auto c : counts) {
    total += c;
    present += c > 0;
  }
  std::vector<double> weights(counts.size(), 0.0);
  for (std::size_t c = 0; c < counts.size(); ++c)
    if (counts[c] > 0) weights[c] = static_cast<double>(total) / (static_cast<double>(present) * counts[c]);
  return weights;
}

std::vector<std::uint32_t> balanced_epoch_order(const SampleSource& source, std::uint64_t seed, std::int64_t epoch) {
  std::vector<std::vector<std::uint32_t>> by_class(source.num_classes());
  for (std::size_t i = 0; i < source.size(); ++i) by_class[source.label(i)].push_back(static_cast<std::uint32_t>(i));
  std::vector<int> present;
  for (std::size_t c = 0; c < by_class.size(); ++c)
    if (!by_class[c].empty()) present.push_back(static_cast<int>(c));
  Rng rng(mix_seed(seed, static_cast<std::uint64_t>(epoch), 0xba1a9cedULL));
  std::vector<std::uint32_t> order(source.size());
  for (auto& index : order) {
    const auto& members = by_class[present[rng.uniform_int(static_cast<int>(present.size()))]];
    index = members[rng.uniform_int(static_cast<int>(members.size()))];
  }
  return order;
}

struct Trainer::Impl {
  Impl(Config config, std::shared_ptr<Classifier> model, TrainData data, fs::path run_dir,
       std::shared_ptr<ProcessGroup> group, std::string segment)
      : run(std::move(config), std::move(model), std::move(data), std::move(run_dir), std::move(group),
            std::move(segment)) {}

  json fit() {
    const auto wall_start = std::chrono::steady_clock::now();
    loop.run();
    if (!checkpoints.saved_current_step()) checkpoints.save(!has_samples(run.data.val));
    if (!has_samples(run.data.val) && !run.state.best_step) run.state.best_step = run.state.step;
    const json test_json = test_with_best_weights(run, evaluator, checkpoints);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
    json summary = summary_record(run, test_json, wall);
    if (run.is_main()) write_file_atomic(run.run_dir / "summary.json", summary.dump(2) + "\n");
    log_summary(run, summary, test_json);
    return summary;
  }

  TrainerRun run;
  Evaluator evaluator{run};
  TrainerCheckpoints checkpoints{run};
  TrainLoop loop{run, evaluator, checkpoints};
};

Trainer::Trainer(Config config, std::shared_ptr<Classifier> model, TrainData data, fs::path run_dir,
                 std::shared_ptr<ProcessGroup> group, std::string segment)
    : impl_(std::make_unique<Impl>(std::move(config), std::move(model), std::move(data), std::move(run_dir),
                                   std::move(group), std::move(segment))) {}

Trainer::~Trainer() = default;

void Trainer::resume(const Checkpoint& checkpoint) { impl_->checkpoints.resume(checkpoint); }

nlohmann::json Trainer::fit() { return impl_->fit(); }

void Trainer::set_after_step(std::function<void(std::int64_t)> hook) { impl_->run.after_step = std::move(hook); }

}  // namespace shoplens
