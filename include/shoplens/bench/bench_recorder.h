// `shoplens bench`'s recorder (docs/BENCH.md): every scenario of a bench config measured in turn,
// its outputs (results.jsonl, results.csv, results.md, junit.xml) written, and the results gated
// against a previous results.jsonl.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "shoplens/bench/bench_results.h"

namespace shoplens {

// What a regression does to the exit code: fail the run (CI's gate), or only warn (a shared machine,
// where two runs of one binary can differ by more than the limit).
enum class FailOn { kRegression, kNever };

struct BenchRecorderOptions {
  std::filesystem::path config;       // the bench config (a scenario matrix)
  std::filesystem::path out;          // folder for the outputs, created if missing
  std::filesystem::path baseline;     // a previous results.jsonl to gate against (empty: no gate)
  std::string max_regression = "5%";  // parse_max_regression's forms
  int trials = 0;                     // repeated trials per scenario (0: the config's)
  std::string source;                 // the records' "source" field (empty: the command line)
  std::string scenario;               // run only this scenario of the config (empty: all; `bench --against`'s trials)
  FailOn fail_on = FailOn::kRegression;
  std::filesystem::path history;  // a history folder the run is appended to (empty: none; bench_history.h)
};

struct BenchRecorderResult {
  BenchEnvironment env;
  std::vector<ScenarioResult> results;
  std::vector<GateVerdict> gate;   // empty without a baseline
  std::filesystem::path markdown;  // results.md

  // Scenarios that came back with an error.
  int failed() const;
  // Scenarios the gate found slower beyond the limit and the noise.
  int regressed() const;
  FailOn fail_on = FailOn::kRegression;
  // The run failed: a scenario failed, or one regressed and regressions fail the run.
  bool failed_the_gate() const { return failed() > 0 || (fail_on == FailOn::kRegression && regressed() > 0); }
};

// Everything that can make the run pointless (the config, the baseline, the limit) is checked
// before the first scenario. An interrupt (SIGINT/SIGTERM) writes the finished scenarios' outputs
// and rethrows. A failed scenario does not stop the others.
BenchRecorderResult run_bench_recorder(const BenchRecorderOptions& options);

}  // namespace shoplens
