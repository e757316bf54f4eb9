// `shoplens bench`: the benchmark recorder for CI (docs/BENCH.md): a matrix of training
// scenarios, repeated trials, medians and percentiles, JSON lines / CSV / Markdown / JUnit XML,
// and a regression gate against a previous results.jsonl.
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "command.h"
#include "shoplens/core/program_files.h"
#include "shoplens/bench/batch_study.h"
#include "shoplens/bench/bench_ab.h"
#include "shoplens/bench/bench_history.h"
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
    app.add_option(
        "-o,--out", out_,
        "folder for results.jsonl, results.csv, results.md and junit.xml (study: report.html; A/B: ab.jsonl, "
        "ab.md, junit.xml; required)");
    app.add_option("--history", record_.history,
                   "append this run (commit, date, machine, GPU, every scenario's trials) to DIR/history.jsonl "
                   "(empty: no history)");
    report_ = app.add_subcommand("report",
                                 "the history page: one trend chart per scenario (bench report --history "
                                 "DIR --out SITE)");
    report_->add_option("--history", report_history_, "the history folder (DIR/history.jsonl)")->required();
    report_->add_option("-o,--out", report_out_, "folder for index.html")->required();
    app.add_option("--baseline", record_.baseline, "a previous results.jsonl to gate against (empty: no gate)");
    app.add_option(
        "--max-regression", record_.max_regression,
        "with --baseline: the largest tolerated drop in median images/s (also must exceed trial noise); A/B: the "
        "largest tolerated slowdown (a significant one beyond it fails)");
    app.add_option(
           "--fail-on", fail_on_,
           "with --baseline or A/B: what fails the run (exit 1): \"regression\" (CI's gate) or \"never\" (report "
           "regressions as warnings; a failed scenario still fails)")
        ->check(CLI::IsMember({"regression", "never"}));
    app.add_option("--trials", record_.trials, "repeated trials per scenario (0: the config's)")->check(non_negative());
    app.add_option("--source", record_.source, "the records' \"source\" field (empty: the command line)");
    app.add_option("--scenario", record_.scenario, "run only this scenario of the config (empty: every scenario)");
    setup_against(app);
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

  // Same-machine A/B (bench_ab.h): the trials alternate between this build and the baseline.
  void setup_against(CLI::App& app) {
    app.add_option("--against", ab_.against,
                   "A/B: the baseline's shoplens binary; each scenario's trials alternate between it and this build "
                   "(empty: no A/B, or this binary with --against-config)");
    app.add_option("--against-config", ab_.against_config,
                   "A/B: the baseline's bench config, scenarios matched by name (empty: --config)");
    app.add_option("--against-results", ab_.against_results,
                   "A/B: a stored results.jsonl as the baseline (unpaired: Mann-Whitney; empty: none)");
    app.add_option("--max-memory-regression", ab_.max_memory_regression,
                   "A/B: the largest tolerated growth of peak memory (process RSS, tensors)");
    app.add_option("--time-metric", ab_.time_metric,
                   "A/B: the throughput the verdict gates: \"wall\" (images/s) or \"cpu\" (images per CPU-second: "
                   "robust to other processes on a shared CPU runner; both are reported)")
        ->check(CLI::IsMember({"wall", "cpu"}));
    app.add_option("--confidence", ab_.confidence,
                   "A/B: confidence of the change's interval; the test's one-sided level is 1 - this")
        ->check(CLI::Range(0.51, 0.999));
  }

  int run_against() {
    if (!record_.baseline.empty() || !record_.history.empty())
      throw UsageError(
          "bench: --baseline and --history belong to a recorder run; give them without --against, "
          "--against-config and --against-results");
    ab_.config = record_.config;
    ab_.out = out_;
    ab_.trials = record_.trials;
    ab_.max_regression = record_.max_regression;
    ab_.fail_on = record_.fail_on;
    ab_.program = running_program();
    const BenchAbResult ab = run_bench_ab(ab_);
    std::cout << ab_markdown(ab) << fmt::format("\nresults: {}\n", ab.markdown.string());
    return ab.failed_the_gate() ? 1 : 0;
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
    if (report_->parsed()) {
      std::cout << "history page: " << write_history_report(report_history_, report_out_).string() << std::endl;
      return 0;
    }
    if (out_.empty()) throw UsageError("bench: --out is required");
    if (study_ == "batch") return run_study();
    if (record_.config.empty()) throw UsageError("bench: --config is required (a bench config; see docs/BENCH.md)");
    record_.out = out_;
    record_.fail_on = fail_on_ == "never" ? FailOn::kNever : FailOn::kRegression;
    if (!ab_.against.empty() || !ab_.against_config.empty() || !ab_.against_results.empty()) return run_against();
    const BenchRecorderResult record = run_bench_recorder(record_);
    std::cout << results_markdown(record.results, record.env, record.gate)
              << fmt::format("\nresults: {}\n", record.markdown.string());
    return record.failed_the_gate() ? 1 : 0;
  }

 private:
  BenchRecorderOptions record_;
  BenchAbOptions ab_;
  CLI::App* report_ = nullptr;
  std::string report_history_, report_out_;
  std::string out_;
  std::string study_;
  std::string fail_on_ = "regression";
  BatchStudyOptions study_options_;
};

}  // namespace

std::unique_ptr<Command> make_bench_command() { return std::make_unique<BenchCommand>(); }

}  // namespace shoplens::cli
