// The contract between `main`'s subcommand table and each verb file.
#pragma once

#include <filesystem>
#include <functional>
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
  // Also says in the verb's help whose defaults it shows: the built-in ones, or those of the
  // --config file given with --help (ConfigDefaultsForHelp).
  void add_to(CLI::App& app);
  // A flag that sets `config_path`; its help shows the config default (the built-in one, or the
  // --config file's under `VERB --help --config FILE`).
  CLI::Option* add_flag_for(CLI::App& app, const std::string& flag, const std::string& config_path,
                            const std::string& help);
  Config resolve();
  // Resolves over `base` (a resumed run's saved config): base <- file <- --set <- flags.
  Config resolve_over(const nlohmann::json& base);
  bool has_config_file() const { return !config_path_.empty(); }
  // True when --print-config was given: the caller prints and exits without running.
  bool print_requested() const { return print_config_; }

 private:
  std::string default_text(const std::string& config_path) const;

  // The --help --config file's resolved config; null: the built-in defaults. A pointer, as json's
  // move may throw and the verbs that hold this are moved.
  std::unique_ptr<const nlohmann::json> shown_defaults_;
  std::string config_path_;
  std::vector<std::string> sets_;
  std::vector<std::string> flag_overrides_;
  bool print_config_ = false;
};

// While alive (the verbs are being declared), makes `VERB --help --config FILE` show FILE's
// values as the defaults of VERB's config flags: a user reading that help is about to run with
// that file, whose values win over the built-in ones. `args` is the command line after the
// program's name; without --help or --config it changes nothing. A file that does not load leaves
// the built-in defaults, with a warning (the run itself reports the error).
class ConfigDefaultsForHelp {
 public:
  explicit ConfigDefaultsForHelp(const std::vector<std::string>& args);
  ~ConfigDefaultsForHelp();
  ConfigDefaultsForHelp(const ConfigDefaultsForHelp&) = delete;
  ConfigDefaultsForHelp& operator=(const ConfigDefaultsForHelp&) = delete;
};

// A flag's former spelling: hidden from --help, still accepted into the same `target`, and each
// use prints a one-line deprecation warning naming the new spelling. Returns the option, for the
// same checks as the new flag's.
template <typename T>
CLI::Option* add_old_spelling(CLI::App& app, const std::string& old_flag, T& target, const std::string& new_spelling);
// The same for a flag without a value (`--json` for `--format json`): `apply` does what the new
// spelling does.
CLI::Option* add_old_flag(CLI::App& app, const std::string& old_flag, const std::string& new_spelling,
                          std::function<void()> apply);
void warn_old_spelling(const std::string& old_spelling, const std::string& new_spelling);

// `--model VALUE` in a verb that loads weights. Before the one grammar (issue 44) `-m/--model`
// there was the path of the weights (now --weights); it keeps that meaning, with a warning, when
// VALUE is not a registered model name and is an existing file or folder or ends in a weights
// extension (.safetensors, .pth, .pt, .ckpt, .bin).
bool is_old_model_path(const std::string& value);
// The weights path of an inference verb from its --weights and --model: --model's value when it
// is an old-style path (warned), else --weights. Clears `model` when it was a path (so it names
// no architecture). UsageError when neither gives a path, or both do.
std::filesystem::path weights_path(const std::string& verb, const std::filesystem::path& weights, std::string& model);
// The same for score and serve, which load only exported model folders and so take no
// architecture: a --model that is not an old-style path is a UsageError.
std::filesystem::path exported_model_folder(const std::string& verb, const std::filesystem::path& weights,
                                            std::string model);
// Declares score's and serve's -w/--weights (the model folder) and -m/--model, now a hidden old
// spelling of it (exported_model_folder resolves the two).
void add_exported_model_flags(CLI::App& app, std::filesystem::path& weights, std::string& model);

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

template <typename T>
CLI::Option* add_old_spelling(CLI::App& app, const std::string& old_flag, T& target, const std::string& new_spelling) {
  return app.add_option(old_flag, target)->group("")->each([old_flag, new_spelling](const std::string&) {
    warn_old_spelling(old_flag, new_spelling);
  });
}

// The factories named in the program's table, one per verb file.
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
std::unique_ptr<Command> make_score_merge_command();
std::unique_ptr<Command> make_predict_command();
std::unique_ptr<Command> make_evaluate_command();
std::unique_ptr<Command> make_launch_command();
std::unique_ptr<Command> make_verify_ledger_command();
std::unique_ptr<Command> make_recommend_command();
std::unique_ptr<Command> make_serve_command();

}  // namespace shoplens::cli
