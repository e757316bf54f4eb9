// `shoplens bench`: the benchmark recorder for CI (docs/BENCH.md): a matrix of training
// scenarios, repeated trials, medians and percentiles, JSON lines / CSV / Markdown / JUnit XML,
// and a regression gate against a previous results.jsonl.
#include <filesystem>
#include <iostream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "command.h"
#include "shoplens/bench/batch_study.h"
#include "shoplens/bench/bench_runner.h"
#include "shoplens/core/atomic_file.h"

namespace shoplens::cli {
namespace {

class BenchCommand : public Command {
 public:
  void setup(CLI::App& app) override {
    app.add_option(
        "--config", config_,
        "bench config: JSON with a scenario matrix (configs/bench_ci.json); with --study batch: a train config "
        "(empty: the defaults)");
    app.add_option("--out", out_,
                   "folder for results.jsonl, results.csv, results.md and junit.xml (study: report.html)")
        ->required();
    app.add_option("--baseline", baseline_, "a previous results.jsonl to gate against (empty: no gate)");
    app.add_option("--max-regression", max_regression_,
                   "with --baseline: the largest tolerated drop in median images/s (also must exceed trial noise)");
    app.add_option("--trials", trials_, "repeated trials per scenario (0: the config's)")->check(non_negative());
    app.add_option("--source", source_, "the records' \"source\" field (empty: the command line)");
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
    app.add_option("--set", study_options_.sets, "study: extra section.key=value overrides for both runs");
  }

  int run_study() {
    study_options_.train_config = config_;
    study_options_.out = out_;
    const auto report = run_batch_study(study_options_, self_binary());
    std::cout << "study: " << (std::filesystem::path(out_) / "study.json").string() << "\nreport: " << report.string()
              << std::endl;
    return 0;
  }

  // The running binary, so the study's training runs are this very build.
  static std::string self_binary() {
    std::error_code ec;
    const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? std::string("shoplens") : p.string();
  }

  int run() override {
    if (study_ == "batch") return run_study();
    if (config_.empty()) throw UsageError("bench: --config is required (a bench config; see docs/BENCH.md)");
    // Everything that can make the run pointless is checked before minutes of measuring.
    BenchConfig config = load_bench_config(config_);
    const double max_regression = parse_max_regression(max_regression_);
    std::map<std::string, BaselineEntry> baseline;
    if (!baseline_.empty()) baseline = load_baseline(baseline_);
    if (trials_ > 0)
      for (auto& s : config.scenarios) s.trials = trials_;
    std::filesystem::create_directories(out_);
    const std::string source = !source_.empty() ? source_
                                                : fmt::format("shoplens bench --config {}{}",
                                                              std::filesystem::path(config_).filename().string(),
                                                              trials_ > 0 ? fmt::format(" --trials {}", trials_) : "");

    const Nvml nvml;
    const BenchEnvironment env = bench_environment(nvml);
    spdlog::info("bench: {} scenarios from {}; GPU telemetry: {}", config.scenarios.size(), config_,
                 nvml.available() ? "NVML " + env.driver : nvml.why());
    const std::filesystem::path out(out_);
    std::vector<ScenarioResult> results;
    std::vector<GateVerdict> gate;
    auto write_outputs = [&] {
      if (!baseline_.empty()) gate = gate_results(results, baseline, max_regression);
      write_file_atomic(out / "results.jsonl", results_jsonl(results, env, source));
      write_file_atomic(out / "results.csv", results_csv(results, env));
      write_file_atomic(out / "results.md", results_markdown(results, env, gate));
      write_file_atomic(out / "junit.xml", results_junit(results, gate, config.name));
    };
    for (std::size_t i = 0; i < config.scenarios.size(); ++i) {
      const auto& s = config.scenarios[i];
      spdlog::info("bench: [{}/{}] {}", i + 1, config.scenarios.size(), s.name);
      try {
        results.push_back(run_scenario(s, nvml));
      } catch (const InterruptedError&) {
        // The scenarios that finished are still worth having; the interrupted one is left out.
        write_outputs();
        spdlog::warn("bench: interrupted; {} finished scenario(s) written to {}", results.size(), out.string());
        throw;
      }
      const auto sum = summarise(results.back());
      if (results.back().error.empty())
        spdlog::info("bench: {}: {:.1f} images/s (noise {:.1f}%), step p50 {:.1f} ms", s.name, sum.images_per_second,
                     sum.noise * 100, sum.step_p50 * 1e3);
    }
    write_outputs();
    std::cout << results_markdown(results, env, gate);

    int failed = 0, regressed = 0;
    for (const auto& r : results)
      if (!r.error.empty()) ++failed;
    for (const auto& g : gate) {
      if (g.regressed) {
        ++regressed;
        spdlog::error("bench: REGRESSION {}", g.message);
      } else if (g.compared) {
        spdlog::info("bench: ok {}", g.message);
      } else {
        spdlog::warn("bench: {}", g.message);
      }
    }
    std::cout << fmt::format("\nresults: {}\n", (out / "results.md").string());
    if (failed) spdlog::error("bench: {} scenario(s) failed", failed);
    if (regressed)
      spdlog::error("bench: {} scenario(s) regressed beyond {:.1f}% and their noise", regressed, max_regression * 100);
    return failed || regressed ? 1 : 0;
  }

 private:
  std::string config_, out_, baseline_, source_;
  std::string max_regression_ = "5%";
  int trials_ = 0;
  std::string study_;
  BatchStudyOptions study_options_;
};

}  // namespace

std::unique_ptr<Command> make_bench_command() { return std::make_unique<BenchCommand>(); }

}  // namespace shoplens::cli
