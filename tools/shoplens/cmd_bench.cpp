// `shoplens bench`: the benchmark recorder for CI (docs/BENCH.md): a matrix of training
// scenarios, repeated trials, medians and percentiles, JSON lines / CSV / Markdown / JUnit XML,
// and a regression gate against a previous results.jsonl.
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "command.h"
#include "shoplens/core/program_files.h"
#include "shoplens/bench/batch_study.h"
#include "shoplens/bench/bench_recorder.h"

namespace shoplens::cli {
namespace {

class BenchCommand : public Command {
 public:
  void setup(CLI::App& app) override {
    app.add_option(
        "--config", record_.config,
        "bench config: JSON with a scenario matrix (configs/bench_ci.json); with --study batch: a train config "
        "(empty: the defaults)");
    app.add_option("-o,--out", out_,
                   "folder for results.jsonl, results.csv, results.md and junit.xml (study: report.html)")
        ->required();
    app.add_option("--baseline", record_.baseline, "a previous results.jsonl to gate against (empty: no gate)");
    app.add_option("--max-regression", record_.max_regression,
                   "with --baseline: the largest tolerated drop in median images/s (also must exceed trial noise)");
    app.add_option("--fail-on", fail_on_,
                   "with --baseline: what fails the run (exit 1): \"regression\" (CI's gate) or \"never\" (report "
                   "regressions as warnings; a failed scenario still fails)")
        ->check(CLI::IsMember({"regression", "never"}));
    app.add_option("--trials", record_.trials, "repeated trials per scenario (0: the config's)")->check(non_negative());
    app.add_option("--source", record_.source, "the records' \"source\" field (empty: the command line)");
    app.add_option(
           "--study", study_,
           "\"batch\": the batch-size study (baseline vs find-batch) instead of the recorder (empty: the recorder)")
        ->check(CLI::IsMember({"", "batch"}));
    app.add_option("--shards", study_options_.shards,
                   "study: prepared shards both runs train on (required with --study batch)");
    app.add_option("--epochs", study_options_.epochs, "study: epochs of each run")->check(positive());
    app.add_option("--baseline-batch", study_options_.baseline_batch, "study: the baseline's micro-batch")
        ->check(positive());
    app.add_option("--memory-budget", study_options_.memory_budget,
                   "study: the budget find-batch fits into (both runs run under it)");
    app.add_option("--threads", study_options_.threads, "study: CPU threads of each run (0: all usable cores)")
        ->check(thread_count());
    app.add_option("--seeds", study_options_.seeds,
                   "study: seeds, each training both runs (mean and spread are reported)")
        ->check(CLI::Range(1, 100));
    app.add_option("--first-seed", study_options_.first_seed, "study: the first seed (then first+1, ...)");
    app.add_option("--set", study_options_.sets,
                   "study: override a config value of both runs: section.key=value (repeatable)")
        ->type_name("KEY=VALUE")
        ->allow_extra_args(false);
  }

  int run_study() {
    study_options_.train_config = record_.config.string();
    study_options_.out = out_;
    const BatchStudyResult study = run_batch_study(study_options_, running_program().string());
    std::cout << study_verdict(study.summary) << "\nstudy: " << study.study_json.string()
              << "\nreport: " << study.report.string() << std::endl;
    return 0;
  }

  int run() override {
    if (study_ == "batch") return run_study();
    if (record_.config.empty()) throw UsageError("bench: --config is required (a bench config; see docs/BENCH.md)");
    record_.out = out_;
    record_.fail_on = fail_on_ == "never" ? FailOn::kNever : FailOn::kRegression;
    const BenchRecorderResult record = run_bench_recorder(record_);
    std::cout << results_markdown(record.results, record.env, record.gate)
              << fmt::format("\nresults: {}\n", record.markdown.string());
    return record.failed_the_gate() ? 1 : 0;
  }

 private:
  BenchRecorderOptions record_;
  std::string out_;
  std::string study_;
  std::string fail_on_ = "regression";
  BatchStudyOptions study_options_;
};

}  // namespace

std::unique_ptr<Command> make_bench_command() { return std::make_unique<BenchCommand>(); }

}  // namespace shoplens::cli
