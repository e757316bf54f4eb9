#include "command.h"

#include <cmath>
#include <iostream>

#include <nlohmann/json.hpp>

#include "shoplens/core/logging.h"
#include "shoplens/core/program_files.h"
#include "shoplens/core/runtime.h"
#include "shoplens/models/model_facts.h"

namespace shoplens::cli {

void ConfigOptions::add_to(CLI::App& app) {
  app.add_option("-c,--config", config_path_, "JSON config file (see configs/)")->check(CLI::ExistingFile);
  app.add_option("--set", sets_, "override a config value: section.key=value (repeatable)")
      ->type_name("KEY=VALUE")
      ->default_str("")
      ->allow_extra_args(false);
  app.add_flag("--print-config", print_config_, "print the resolved config as JSON and exit");
  add_flag_for(app, "--threads", "run.threads", "CPU threads (0: all usable cores)");
  add_flag_for(app, "--seed", "run.seed", "random seed");
  add_flag_for(app, "--log-level", "run.log_level", "trace, debug, info, warn or error");
}

CLI::Option* ConfigOptions::add_flag_for(CLI::App& app, const std::string& flag, const std::string& config_path,
                                         const std::string& help) {
  std::string default_text, type = "TEXT";
  for (const auto& field : config_fields()) {
    if (field.path == config_path) {
      default_text = field.default_json;
      if (field.type == "integer")
        type = "INT";
      else if (field.type == "number")
        type = "FLOAT";
      else if (field.type == "boolean")
        type = "BOOL";
      if (default_text.size() >= 2 && default_text.front() == '"')
        default_text = default_text.substr(1, default_text.size() - 2);
    }
  }
  auto* option = app.add_option_function<std::string>(
      flag, [this, config_path](const std::string& value) { flag_overrides_.push_back(config_path + "=" + value); },
      help + " [config: " + config_path + "]");
  option->default_str(default_text)->type_name(type);
  return option;
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
