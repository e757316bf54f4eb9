#include "command.h"

#include <cmath>
#include <iostream>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "shoplens/core/logging.h"
#include "shoplens/core/program_files.h"
#include "shoplens/core/runtime.h"
#include "shoplens/core/strings.h"
#include "shoplens/models/model_facts.h"

namespace shoplens::cli {

namespace {

// The --help --config request while the verbs are declared (ConfigDefaultsForHelp).
struct HelpRequest {
  std::string verb;
  std::string config_file;
};
const HelpRequest* help_request = nullptr;

// The value after `-c`/`--config`, or of `--config=FILE`; empty when there is none.
std::string config_file_argument(const std::vector<std::string>& args) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") break;
    if ((args[i] == "-c" || args[i] == "--config") && i + 1 < args.size()) return args[i + 1];
    if (args[i].rfind("--config=", 0) == 0) return args[i].substr(9);
  }
  return {};
}

bool asks_for_help(const std::vector<std::string>& args) {
  for (const auto& arg : args) {
    if (arg == "--") return false;
    if (arg == "-h" || arg == "--help") return true;
  }
  return false;
}

std::string type_of(const std::string& config_path) {
  for (const auto& field : config_fields()) {
    if (field.path != config_path) continue;
    if (field.type == "integer") return "INT";
    if (field.type == "number") return "FLOAT";
    if (field.type == "boolean") return "BOOL";
  }
  return "TEXT";
}

// A JSON value as a user types it: strings without their quotes.
std::string as_typed(const nlohmann::json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

}  // namespace

ConfigDefaultsForHelp::ConfigDefaultsForHelp(const std::vector<std::string>& args) {
  static HelpRequest request;
  request = {args.empty() ? std::string() : args.front(), config_file_argument(args)};
  if (asks_for_help(args) && !request.config_file.empty()) help_request = &request;
}

ConfigDefaultsForHelp::~ConfigDefaultsForHelp() { help_request = nullptr; }

void ConfigOptions::add_to(CLI::App& app) {
  if (help_request && help_request->verb == app.get_name()) {
    try {
      shown_defaults_ =
          std::make_unique<const nlohmann::json>(config_to_json(load_config(help_request->config_file, {})));
    } catch (const Error& e) {
      spdlog::warn("--help shows the built-in defaults: {}", e.what());
    }
  }
  app.footer(!shown_defaults_
                 ? "Defaults shown are the built-in ones. A --config file's values win over them, --set over the "
                   "file, and a flag over --set; `--help --config FILE` shows FILE's values as the defaults."
                 : "Defaults shown are " + help_request->config_file +
                       "'s values (over the built-in ones); --set wins over them, and a flag over --set.");
  app.add_option("-c,--config", config_path_, "JSON config file (see configs/)")
      ->check(CLI::ExistingFile)
      ->type_name("FILE");
  app.add_option("--set", sets_, "override a config value: section.key=value (repeatable)")
      ->type_name("KEY=VALUE")
      ->default_str("")
      ->allow_extra_args(false);
  app.add_flag("--print-config", print_config_, "print the resolved config as JSON and exit");
  add_flag_for(app, "--threads", "run.threads", "CPU threads (0: all usable cores)");
  add_flag_for(app, "--seed", "run.seed", "random seed");
  add_flag_for(app, "--log-level", "run.log_level", "trace, debug, info, warn or error");
}

std::string ConfigOptions::default_text(const std::string& config_path) const {
  if (shown_defaults_) {
    const nlohmann::json::json_pointer pointer("/" + join(split(config_path, '.'), "/"));
    if (shown_defaults_->contains(pointer)) return as_typed(shown_defaults_->at(pointer));
  }
  for (const auto& field : config_fields())
    if (field.path == config_path) return as_typed(nlohmann::json::parse(field.default_json));
  return {};
}

CLI::Option* ConfigOptions::add_flag_for(CLI::App& app, const std::string& flag, const std::string& config_path,
                                         const std::string& help) {
  auto* option = app.add_option_function<std::string>(
      flag, [this, config_path](const std::string& value) { flag_overrides_.push_back(config_path + "=" + value); },
      help + " [config: " + config_path + "]");
  option->default_str(default_text(config_path))->type_name(type_of(config_path));
  return option;
}

std::filesystem::path exported_model_folder(const std::string& verb, const std::filesystem::path& weights,
                                            std::string model) {
  if (!model.empty() && !is_old_model_path(model))
    throw UsageError(verb + ": --model '" + model + "' is no model folder; " + verb +
                     " loads the folder written by `shoplens export`, given as --weights DIR (its card names the "
                     "architecture)");
  return weights_path(verb, weights, model);
}

void add_exported_model_flags(CLI::App& app, std::filesystem::path& weights, std::string& model) {
  app.add_option("-w,--weights", weights, "model folder written by `shoplens export`")->type_name("DIR");
  app.add_option("-m,--model", model)->group("");  // weights_path warns when it is used
}

CLI::Option* add_old_flag(CLI::App& app, const std::string& old_flag, const std::string& new_spelling,
                          std::function<void()> apply) {
  return app
      .add_flag_callback(
          old_flag,
          [old_flag, new_spelling, apply = std::move(apply)] {
            warn_old_spelling(old_flag, new_spelling);
            apply();
          },
          "")
      ->group("");
}

void warn_old_spelling(const std::string& old_spelling, const std::string& new_spelling) {
  spdlog::warn("{} is deprecated: use {}; the old spelling still works for now", old_spelling, new_spelling);
}

bool is_old_model_path(const std::string& value) {
  if (value.empty() || find_model_facts(value)) return false;
  std::error_code ec;
  if (std::filesystem::exists(value, ec)) return true;
  const std::string extension = to_lower(std::filesystem::path(value).extension().string());
  for (const char* weights : {".safetensors", ".pth", ".pt", ".ckpt", ".bin"})
    if (extension == weights) return true;
  return false;
}

std::filesystem::path weights_path(const std::string& verb, const std::filesystem::path& weights, std::string& model) {
  if (!is_old_model_path(model)) {
    if (weights.empty())
      throw UsageError(verb +
                       ": --weights PATH is required (a model folder, training run, checkpoint or weights file)");
    return weights;
  }
  warn_old_spelling("--model PATH", "--weights PATH (--model now names an architecture)");
  if (!weights.empty()) throw UsageError(verb + ": give the weights once: --weights, or its old spelling --model PATH");
  std::filesystem::path old = model;
  model.clear();
  return old;
}

Config ConfigOptions::resolve() { return resolve_over(nlohmann::json()); }

Config ConfigOptions::resolve_over(const nlohmann::json& base) {
  std::vector<std::string> overrides = sets_;
  overrides.insert(overrides.end(), flag_overrides_.begin(), flag_overrides_.end());
  return load_config(base, config_path_.empty() ? std::nullopt : std::optional<std::string>(config_path_), overrides);
}

namespace {

// A finite number (not NaN or infinite) within [lo, hi], `lo` excluded when `open_below`. The
// description is for the error message only: help shows the option's own text, not a validator's.
CLI::Validator finite_number(double lo, double hi, bool open_below, const std::string& description) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        double value = 0;
        try {
          std::size_t used = 0;
          value = std::stod(text, &used);
          if (used != text.size()) return "'" + text + "' is not " + description;
        } catch (const std::exception&) {
          return "'" + text + "' is not " + description;
        }
        if (!std::isfinite(value) || value < lo || value > hi || (open_below && value == lo))
          return "'" + text + "' is not " + description;
        return {};
      },
      std::string());
}

}  // namespace

CLI::Validator non_negative() { return finite_number(0, HUGE_VAL, false, "a finite number >= 0"); }
CLI::Validator positive() { return finite_number(0, HUGE_VAL, true, "a finite number > 0"); }
CLI::Validator finite_between(double lo, double hi) {
  auto whole = [](double x) { return std::to_string(static_cast<long long>(x)); };
  return finite_number(lo, hi, false, "a finite number between " + whole(lo) + " and " + whole(hi));
}
CLI::Validator thread_count() {
  return finite_number(0, kMaxThreads, false,
                       "a thread count from 0 (all usable cores) to " + std::to_string(kMaxThreads));
}

std::filesystem::path shipped_or(const std::string& value, const std::string& relative) {
  return value == kShipped ? shipped_file(relative) : std::filesystem::path(value);
}

std::optional<Config> begin(ConfigOptions& options) {
  Config config = options.resolve();
  set_log_level(config.run.log_level);
  if (options.print_requested()) {
    std::cout << config_to_json(config).dump(2) << std::endl;
    return std::nullopt;
  }
  prefer_passive_openmp(gemm_bound_model(config.model.name), resolve_threads(config.run.threads), config.model.name);
  set_compute_threads(config.run.threads);
  return config;
}

}  // namespace shoplens::cli
