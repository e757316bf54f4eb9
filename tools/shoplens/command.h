// The contract between `main`'s subcommand table and each verb file.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json_fwd.hpp>

#include "shoplens/core/config.h"
#include "shoplens/core/errors.h"

namespace shoplens::cli {

class Command {
 public:
  virtual ~Command() = default;
  // Declares the options on the subcommand's own CLI11 app.
  virtual void setup(CLI::App& app) = 0;
  // Runs after parsing; returns the exit code. Errors are thrown, not returned.
  virtual int run() = 0;
};

struct CommandEntry {
  const char* name;
  const char* help;
  std::unique_ptr<Command> (*make)();
};

// Options shared by every verb that reads a config: --config, --set, --print-config, and flags
// that are shorthands for a config key (the flag wins over --set, which wins over the file).
class ConfigOptions {
 public:
  void add_to(CLI::App& app);
  // A flag that sets `config_path`; its help shows the config default.
  CLI::Option* add_flag_for(CLI::App& app, const std::string& flag, const std::string& config_path,
                            const std::string& help);
  Config resolve();
  // Resolves over `base` (a resumed run's saved config): base <- file <- --set <- flags.
  Config resolve_over(const nlohmann::json& base);
  bool has_config_file() const { return !config_path_.empty(); }
  // True when --print-config was given: the caller prints and exits without running.
  bool print_requested() const { return print_config_; }

 private:
  std::string config_path_;
  std::vector<std::string> sets_;
  std::vector<std::string> flag_overrides_;
  bool print_config_ = false;
};

// Checks for a verb's own numeric options. Unlike CLI11's NonNegativeNumber and PositiveNumber
// they refuse NaN and infinities (which compare false with every bound and so passed: a NaN
// timeout turned every request into a 504), and thread counts stop at kMaxThreads (40000 decode
// threads aborted the process). Each failure is a usage error (exit 2) naming the flag.
constexpr int kMaxThreads = 1024;
CLI::Validator non_negative();
CLI::Validator positive();
CLI::Validator thread_count();  // 0 (all usable cores) to kMaxThreads
CLI::Validator finite_between(double lo, double hi);

// The value a default names to mean "the file shipped with the program" (core/program_files.h).
inline constexpr const char* kShipped = "shipped";
// `value`, or the shipped `relative` file when value is kShipped.
std::filesystem::path shipped_or(const std::string& value, const std::string& relative);

// Common start of a verb: resolves the config, applies log level and threads,
// prints the config and returns nullopt when --print-config was given.
std::optional<Config> begin(ConfigOptions& options);

// The factories named in main's table, one per verb file.
std::unique_ptr<Command> make_config_command();
std::unique_ptr<Command> make_make_data_command();
std::unique_ptr<Command> make_prepare_command();
std::unique_ptr<Command> make_load_command();
std::unique_ptr<Command> make_bench_data_command();
std::unique_ptr<Command> make_train_command();
std::unique_ptr<Command> make_bench_train_command();
std::unique_ptr<Command> make_bench_command();
std::unique_ptr<Command> make_find_batch_command();
std::unique_ptr<Command> make_export_command();
std::unique_ptr<Command> make_score_command();
std::unique_ptr<Command> make_predict_command();
std::unique_ptr<Command> make_evaluate_command();
std::unique_ptr<Command> make_launch_command();
std::unique_ptr<Command> make_verify_ledger_command();
std::unique_ptr<Command> make_recommend_command();
std::unique_ptr<Command> make_serve_command();

}  // namespace shoplens::cli
