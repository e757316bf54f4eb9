// The resolved configuration of a run: typed sections, a schema that validates JSON config files
// (unknown keys get the nearest valid key, wrong types name the JSON path), `--set` overrides,
// and the JSON form written into every run directory. See docs/CONFIG.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "shoplens/core/logging.h"
// Each section is declared by the layer that uses it; enum-like values and sizes are typed
// there, and this schema turns a file's strings into them once, at load. Until the composite
// below and its schema move up to the job layer (issue 42), core includes those headers: the one
// upward edge scripts/check_layers allows.
#include "shoplens/batch/find_batch_options.h"
#include "shoplens/data/data_options.h"
#include "shoplens/dist/dist_options.h"
#include "shoplens/models/model_options.h"
#include "shoplens/train/train_options.h"

namespace shoplens {

struct RunConfig {
  std::string dir;  // run directory; empty = runs/<command>-<timestamp>
  std::int64_t seed = 1234;
  int threads = 0;  // 0 = every core this process may use
  LogLevel log_level = LogLevel::kInfo;
};

struct Config {
  RunConfig run;
  DataConfig data;
  AugmentConfig augment;
  LoaderConfig loader;
  ModelConfig model;
  OptimConfig optim;
  ScheduleConfig schedule;
  TrainConfig train;
  FindBatchConfig find_batch;
  DistConfig dist;
  TextConfig text;
};

// Every field of every section: dotted name, type, default and help. Drives validation,
// `--set`, `--print-config` and docs/CONFIG.md.
struct ConfigFieldInfo {
  std::string path;  // "data.storage_size"
  std::string type;  // "integer", "number", "string", "boolean", "list of numbers", ...
  std::string default_json;
  std::string help;
};
std::vector<ConfigFieldInfo> config_fields();

nlohmann::json config_to_json(const Config& config);

// Validates `doc` against the schema and returns the typed config. `source` names the origin
// (a file path or "--set") in error messages. Missing keys keep their defaults.
Config config_from_json(const nlohmann::json& doc, const std::string& source);

// Applies "section.key=value" to `doc` (the JSON form of a config). The value is parsed as the
// field's type: numbers and booleans as JSON, strings raw, lists as "a,b,c" or JSON arrays.
void apply_override(nlohmann::json& doc, const std::string& assignment);

// Defaults <- config file (if any) <- overrides, in that order, validated at each step.
Config load_config(const std::optional<std::string>& path, const std::vector<std::string>& overrides);
// The same over a base document (a resumed run's saved config): base <- file <- overrides.
Config load_config(const nlohmann::json& base, const std::optional<std::string>& path,
                   const std::vector<std::string>& overrides);

// Reads a JSON file, throwing ConfigError with the file name and the parser's line/column.
nlohmann::json read_json_file(const std::string& path);

}  // namespace shoplens
