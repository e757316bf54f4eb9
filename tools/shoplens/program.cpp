#include "program.h"

#include <algorithm>
#include <cctype>
#include <iostream>

#include <spdlog/spdlog.h>

#include "shoplens/core/errors.h"
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
    {"score-merge",
     "join the shards of a sharded score job: every input row exactly once, one report (rows, errors, images/s, cost)",
     &make_score_merge_command},
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

// The spellings a user may type for `verb`'s options: hidden ones (old spellings) are not offered.
std::vector<std::string> visible_option_names(const CLI::App& verb) {
  std::vector<std::string> names;
  for (const CLI::Option* option : verb.get_options()) {
    if (option->get_group().empty()) continue;
    for (const auto& name : option->get_lnames()) names.push_back("--" + name);
    for (const auto& name : option->get_snames()) names.push_back("-" + name);
  }
  return names;
}

bool looks_like_option(const std::string& arg) {
  if (arg.size() < 2 || arg[0] != '-') return false;
  // "-1", "-0.5", "-nan", "-inf": a negative value, not a flag.
  const std::string rest = to_lower(arg.substr(1));
  return !(std::isdigit(static_cast<unsigned char>(rest[0])) || rest[0] == '.' || rest == "nan" || rest == "inf");
}

}  // namespace

std::vector<std::string> command_names() {
  std::vector<std::string> names;
  for (const auto& entry : kCommands) names.emplace_back(entry.name);
  return names;
}

void tidy_help(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    // CLI11 offers no count of an option's validators: walk them until it says there is none.
    for (int i = 0;; ++i) {
      CLI::Validator* validator = nullptr;
      try {
        validator = option->get_validator(i);
      } catch (const CLI::OptionNotFound&) {
        break;
      }
      validator->description("");  // the check stays; its failure message is its own
    }
    if (option->get_default_str() == "[]") option->default_str("");
  }
}

std::string unexpected_arguments_message(const CLI::App& verb, const std::vector<std::string>& extras) {
  const std::vector<std::string> known = visible_option_names(verb);
  const std::string where = verb.get_parent() ? "shoplens " + verb.get_name() : std::string("shoplens");
  std::vector<std::string> unknown;
  for (const auto& arg : extras) {
    if (!looks_like_option(arg)) continue;
    const std::string flag = arg.substr(0, arg.find('='));
    if (std::find(known.begin(), known.end(), flag) != known.end()) continue;  // parsed out of order, not wrong
    unknown.push_back("unknown option '" + flag + "'" + did_you_mean(flag, known));
  }
  if (unknown.empty()) unknown.push_back("unexpected arguments: " + join(extras, " "));
  return where + ": " + join(unknown, "; ") + "; run '" + where + " --help' for the options";
}

Program::Program(const std::vector<std::string>& args)
    : app_(
          "shoplens: train image-quality classifiers safely and fast, and score them in batch.\n"
          "Exit codes: 0 ok, 1 failure, 2 usage or config error, 130 interrupted.",
          "shoplens") {
  app_.require_subcommand(0, 1);
  app_.option_defaults()->always_capture_default();
  app_.set_help_all_flag("--help-all", "help for every subcommand");
  app_.add_flag("--version", show_version_, "print version, git commit, LibTorch version and CUDA availability");
  const ConfigDefaultsForHelp config_defaults(args);
  for (const auto& entry : kCommands) {
    CLI::App* verb = app_.add_subcommand(entry.name, entry.help);
    auto command = entry.make();
    command->setup(*verb);
    tidy_help(*verb);
    commands_.emplace_back(verb, std::move(command));
  }
}

const CLI::App& Program::parsed_verb() const {
  for (const auto& [verb, command] : commands_)
    if (verb->parsed()) return *verb;
  return app_;
}

std::vector<std::string> Program::unexpected_arguments() const {
  // Which app keeps an argument it did not take depends on where the parse stood: the verb's own
  // or the program's.
  std::vector<std::string> extras = parsed_verb().remaining();
  if (&parsed_verb() != &app_)
    for (auto& arg : app_.remaining()) extras.push_back(std::move(arg));
  return extras;
}

std::vector<CLI::App*> Program::verbs() const {
  std::vector<CLI::App*> verbs;
  for (const auto& [verb, command] : commands_) verbs.push_back(verb);
  return verbs;
}

int Program::report_parse_error(const CLI::ParseError& error) {
  if (dynamic_cast<const CLI::ExtrasError*>(&error)) {
    spdlog::error("{}", unexpected_arguments_message(parsed_verb(), unexpected_arguments()));
    return static_cast<int>(ExitCode::kUsage);
  }
  const int code = app_.exit(error);
  return code == 0 ? 0 : static_cast<int>(ExitCode::kUsage);
}

int Program::run(int argc, char** argv) {
  // A mistyped subcommand gets the nearest name, not CLI11's generic complaint.
  if (argc > 1 && argv[1][0] != '-') {
    const auto names = command_names();
    if (std::find(names.begin(), names.end(), argv[1]) == names.end()) {
      spdlog::error("unknown command '{}'{}; run 'shoplens --help' for the list", argv[1],
                    did_you_mean(argv[1], names));
      return static_cast<int>(ExitCode::kUsage);
    }
  }
  try {
    app_.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return report_parse_error(e);
  }
  if (show_version_) {
    std::cout << version_string() << std::endl;
    return 0;
  }
  for (auto& [verb, command] : commands_)
    if (verb->parsed()) return command->run();
  std::cout << app_.help() << std::endl;
  return static_cast<int>(ExitCode::kUsage);
}

}  // namespace shoplens::cli
