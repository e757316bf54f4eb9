// `shoplens`: one program, one declarative table of subcommands, errors caught once here.
#include <cstring>
#include <iostream>
#include <vector>

#include <CLI/CLI.hpp>
#include <c10/util/Exception.h>
#include <spdlog/spdlog.h>

#include "command.h"
#include "shoplens/core/crash_report.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/interrupt.h"
#include "shoplens/core/logging.h"
#include "shoplens/core/runtime.h"
#include "shoplens/core/strings.h"

namespace shoplens::cli {
namespace {

const CommandEntry kCommands[] = {
    {"make-data", "write a synthetic product catalog (images + CSV manifest), or tokenized text shards (--task text)",
     &make_make_data_command},
    {"prepare", "decode, validate and pack images into checksummed shards, with a report", &make_prepare_command},
    {"load", "run the training loader over prepared shards and report its throughput", &make_load_command},
    {"find-batch", "find the largest micro-batch that fits the memory budget by probing the real training step",
     &make_find_batch_command},
    {"train", "train a classifier on prepared shards: AMP, accumulation, checkpoints, resume, metrics",
     &make_train_command},
    {"launch", "run the workers of a data-parallel job (torchrun's environment), restart them when one dies",
     &make_launch_command},
    {"verify-ledger", "prove from a run's sample ledger that every training sample was used exactly once per epoch",
     &make_verify_ledger_command},
    {"export",
     "turn a trained run into a verified model folder (safetensors weights + model card), ONNX or a Triton "
     "repository",
     &make_export_command},
    {"score", "score images with an exported model: resumable chunks, error rows, latency percentiles",
     &make_score_command},
    {"predict",
     "top-k predictions from weights (model folder, run, checkpoint, .pth/.safetensors) for a folder, "
     "CSV, list or one image",
     &make_predict_command},
    {"evaluate", "accuracy, top-5, macro-F1, per-class metrics, confusion matrix and calibration on labelled images",
     &make_evaluate_command},
    {"serve", "serve an exported model over HTTP: micro-batching, p95 target, metrics, graceful drain",
     &make_serve_command},
    {"bench",
     "benchmark recorder for CI: a scenario matrix, medians of repeated trials, JSONL/CSV/Markdown/JUnit, "
     "regression gate against a baseline",
     &make_bench_command},
    {"bench-data", "benchmark prepare and the loader against the torchvision pipeline", &make_bench_data_command},
    {"bench-train",
     "benchmark the training step on synthetic tensors (compare with Python: scripts/bench/train_step.sh)",
     &make_bench_train_command},
    {"recommend", "which hardware to train on: time and cost per full run from bench results and the price table",
     &make_recommend_command},
    {"config", "print the resolved config, or the schema of every key", &make_config_command},
};

std::vector<std::string> command_names() {
  std::vector<std::string> names;
  for (const auto& entry : kCommands) names.emplace_back(entry.name);
  return names;
}

int run_main(int argc, char** argv) {
  CLI::App app{
      "shoplens: train image-quality classifiers safely and fast, and score them in batch.\n"
      "Exit codes: 0 ok, 1 failure, 2 usage or config error, 130 interrupted."};
  app.name("shoplens");
  app.require_subcommand(0, 1);
  app.option_defaults()->always_capture_default();
  app.set_help_all_flag("--help-all", "help for every subcommand");
  bool show_version = false;
  app.add_flag("--version", show_version, "print version, git commit, LibTorch version and CUDA availability");

  // A mistyped subcommand gets the nearest name, not CLI11's generic complaint.
  if (argc > 1 && argv[1][0] != '-') {
    const auto names = command_names();
    if (std::find(names.begin(), names.end(), argv[1]) == names.end()) {
      spdlog::error("unknown command '{}'{}; run 'shoplens --help' for the list", argv[1],
                    did_you_mean(argv[1], names));
      return static_cast<int>(ExitCode::kUsage);
    }
  }

  std::vector<std::pair<CLI::App*, std::unique_ptr<Command>>> commands;
  for (const auto& entry : kCommands) {
    CLI::App* sub = app.add_subcommand(entry.name, entry.help);
    auto command = entry.make();
    command->setup(*sub);
    commands.emplace_back(sub, std::move(command));
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : static_cast<int>(ExitCode::kUsage);
  }

  if (show_version) {
    std::cout << version_string() << std::endl;
    return 0;
  }
  for (auto& [sub, command] : commands)
    if (sub->parsed()) return command->run();
  std::cout << app.help() << std::endl;
  return static_cast<int>(ExitCode::kUsage);
}

}  // namespace
}  // namespace shoplens::cli

int main(int argc, char** argv) {
  using namespace shoplens;
  tune_host_allocator();
  remember_command_line(argc, argv);
  install_interrupt_handlers();
  install_crash_report();
  init_logging("info");
  try {
    return cli::run_main(argc, argv);
  } catch (const Error& e) {
    if (e.exit_code() == ExitCode::kInterrupted)
      spdlog::warn("interrupted; stopped at a safe point");
    else
      spdlog::error("{}", e.what());
    return static_cast<int>(e.exit_code());
  } catch (const c10::Error& e) {
    // LibTorch's own errors carry a C++ backtrace that helps nobody running the tool.
    spdlog::error("{}", e.what_without_backtrace());
    return static_cast<int>(ExitCode::kFailure);
  } catch (const std::bad_alloc&) {
    spdlog::error("out of memory");
    return static_cast<int>(ExitCode::kFailure);
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return static_cast<int>(ExitCode::kFailure);
  }
}
