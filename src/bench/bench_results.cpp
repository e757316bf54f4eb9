#include "shoplens/bench/bench_results.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <utility>

#include <fmt/format.h>

#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/json_fields.h"
#include "shoplens/core/json_limits.h"
#include "shoplens/core/json_lines.h"
#include "shoplens/core/runtime.h"
#include "shoplens/core/stats.h"
#include "shoplens/core/strings.h"
#include "shoplens/models/model_facts.h"

namespace shoplens {
namespace {

using json = nlohmann::json;

const std::vector<std::string> kTopKeys = {"format",   "format_version", "name",     "note",
                                           "defaults", "matrix",         "scenarios"};

// Where a value sits: the file and its JSON path, as the project's one checked reader names them
// ("b.json: scenarios[2].batch: expected ...").
struct At {
  std::string origin, path;
  At operator/(const std::string& key) const { return {origin, path + "." + key}; }
  std::string text() const { return origin + ": " + path; }
};

using Reader = JsonValue<ConfigError>;

// How one key of a scenario object sets its field.
using KeySetter = std::function<void(BenchScenario&, const json&, const At&)>;

int whole_number(const json& v, int lo, const At& at) {
  return static_cast<int>(Reader::integer(v, lo, std::numeric_limits<int>::max(), at.path, at.origin));
}

template <class C>
KeySetter text_key(std::string C::*field) {
  return [field](BenchScenario& s, const json& v, const At& at) { Reader::read(v, s.*field, at.path, at.origin); };
}

// An enum field through its name table; `allowed` (default: every name) is what the key accepts.
template <class C, class E, std::size_t N>
KeySetter enum_key(E C::*field, const EnumName<E> (&table)[N], std::vector<std::string> allowed = {}) {
  if (allowed.empty()) allowed = names_of(table);
  return [field, &table, allowed = std::move(allowed)](BenchScenario& s, const json& v, const At& at) {
    s.*field = *value_in(table, Reader::choice(v, allowed, at.path, at.origin));
  };
}

void set_memory_budget(BenchScenario& s, const json& v, const At& at) {
  std::string text;
  Reader::read(v, text, at.path, at.origin);
  try {
    s.memory_budget = parse_byte_size(text, at.path);
  } catch (const UsageError& e) {
    throw ConfigError(at.origin + ": " + e.what());
  }
}

template <class C>
KeySetter count_key(int C::*field, int lo) {
  return [field, lo](BenchScenario& s, const json& v, const At& at) { s.*field = whole_number(v, lo, at); };
}

void set_batch(BenchScenario& s, const json& v, const At& at) {
  if (v.is_string()) {
    if (v.get<std::string>() != "auto") Reader::type_error(at.origin, at.path, "a whole number >= 1 or \"auto\"", v);
    s.batch_auto = true;
    s.batch = 0;
  } else {
    s.batch = whole_number(v, 1, at);
    s.batch_auto = false;
  }
}

// Every key a scenario (or "defaults", or a matrix axis) may set, in the order docs/BENCH.md lists them.
const std::vector<std::pair<std::string, KeySetter>>& scenario_keys() {
  static const std::vector<std::pair<std::string, KeySetter>> keys = {
      {"name", text_key(&BenchScenario::name)},
      {"model", text_key(&BenchScenario::model)},
      {"precision", enum_key(&BenchScenario::precision, kPrecisionNames)},
      {"batch", set_batch},
      {"device", enum_key(&BenchScenario::device, kDeviceChoiceNames, {"cpu", "cuda"})},
      {"threads", count_key(&BenchScenario::threads, 0)},
      {"data", enum_key(&BenchScenario::data, kBenchDataNames)},
      {"shards", text_key(&BenchScenario::shards)},
      {"loader_workers", count_key(&BenchScenario::loader_workers, 0)},
      {"image_size", count_key(&BenchScenario::image_size, 8)},
      {"num_classes", count_key(&BenchScenario::num_classes, 2)},
      {"optimizer", enum_key(&BenchScenario::optimizer, kOptimizerKindNames)},
      {"optimizer_impl", enum_key(&BenchScenario::optimizer_impl, kOptimizerImplNames)},
      {"channels_last",
       [](BenchScenario& s, const json& v, const At& at) { Reader::read(v, s.channels_last, at.path, at.origin); }},
      {"warmup_steps", count_key(&BenchScenario::warmup_steps, 0)},
      {"steps", count_key(&BenchScenario::steps, 1)},
      {"trials", count_key(&BenchScenario::trials, 1)},
      {"memory_budget", set_memory_budget},
      {"hardware", text_key(&BenchScenario::hardware)},
      {"recommend_scenario", text_key(&BenchScenario::recommend_scenario)},
      {"seed", [](BenchScenario& s, const json& v,
                  const At& at) { s.seed = static_cast<std::uint64_t>(whole_number(v, 0, at)); }},
      {"seq_len", count_key(&BenchScenario::seq_len, 1)},
      {"vocab_size", count_key(&BenchScenario::vocab_size, 3)},
  };
  return keys;
}

void apply_key(BenchScenario& s, const std::string& key, const json& v, const At& at) {
  const auto& keys = scenario_keys();
  for (const auto& [name, set] : keys)
    if (name == key) return set(s, v, at);
  std::vector<std::string> names;
  names.reserve(keys.size());
  for (const auto& row : keys) names.push_back(row.first);
  Reader::unknown_key(at.origin, at.path, key, names);
}

void apply_object(BenchScenario& s, const json& obj, const At& at) {
  if (!obj.is_object()) Reader::type_error(at.origin, at.path, "object", obj);
  for (const auto& [k, v] : obj.items()) apply_key(s, k, v, at / k);
}

std::string cell_name(const BenchScenario& s) {
  std::string name =
      fmt::format("{}-{}-b{}-{}-t{}", s.model, precision_name(s.precision),
                  s.batch_auto ? "auto" : std::to_string(s.batch), device_choice_name(s.device), s.threads);
  if (is_text_model(s.model)) name += fmt::format("-L{}", s.seq_len);
  if (s.data == BenchData::kShards) name += "-shards";
  return name;
}

std::string num(double v, int precision = 4) {
  if (!std::isfinite(v)) return "";
  std::ostringstream os;
  os.precision(precision);
  os << v;
  return os.str();
}

std::string mib(double bytes) { return bytes < 0 ? "n/a" : fmt::format("{:.0f}", bytes / (1024.0 * 1024.0)); }

double median(const std::vector<double>& v) { return percentile(v, 0.5); }

std::string csv_cell(const std::string& v) {
  if (v.find_first_of(",\"\n") == std::string::npos) return v;
  std::string out = "\"";
  for (char c : v) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string md_cell(const std::string& v) {
  std::string out;
  for (char c : v) out += c == '|' ? std::string("\\|") : std::string(1, c == '\n' ? ' ' : c);
  return out;
}

// Text scenarios say their sequence length, token rate and padding where the data kind is.
std::string data_cell(const ScenarioResult& r) {
  const char* data = name_in(kBenchDataNames, r.scenario.data);
  if (!r.text) return data;
  std::string cell = fmt::format("{} L{}", data, r.scenario.seq_len);
  const double tokens = median(r.trial_tokens_per_second);
  if (tokens > 0) cell += fmt::format(", {:.0f} tok/s", tokens);
  if (r.padding_fraction > 0) cell += fmt::format(", {:.1f}% pad", r.padding_fraction * 100);
  return cell;
}

// A throttled trial is flagged wherever the result is shown: its figures are the clocks', not the code's.
std::string throttled_note(const ScenarioResult& r) {
  const int n = r.throttled_trials();
  return n == 0 ? "" : fmt::format(" (GPU throttled in {} of {} trials)", n, r.trial_gpu.size());
}

}  // namespace

namespace {

// The matrix's cross product: keys in alphabetical order (nlohmann::json's object order), each list
// in the file's order; a scalar is a list of one. Names are generated.
std::vector<BenchScenario> matrix_scenarios(const json& m, const BenchScenario& defaults, const At& at) {
  const std::string where = at.text();
  if (!m.is_object() || m.empty()) throw ConfigError(where + ": expected an object of lists");
  std::vector<BenchScenario> cells{defaults};
  for (const auto& [k, v] : m.items()) {
    if (k == "name") throw ConfigError(where + ".name: names are generated for matrix cells");
    const json values = v.is_array() ? v : json::array({v});
    if (values.empty()) throw ConfigError(where + "." + k + ": empty list");
    std::vector<BenchScenario> next;
    next.reserve(cells.size() * values.size());
    for (const auto& cell : cells)
      for (std::size_t i = 0; i < values.size(); ++i) {
        BenchScenario s = cell;
        apply_key(s, k, values[i], At{at.origin, fmt::format("{}.{}[{}]", at.path, k, i)});
        next.push_back(s);
      }
    cells = std::move(next);
  }
  for (auto& s : cells) s.name = cell_name(s);
  return cells;
}

std::vector<BenchScenario> listed_scenarios(const json& list, const BenchScenario& defaults,
                                            const std::string& origin) {
  if (!list.is_array()) throw ConfigError(origin + ": scenarios: expected a list");
  std::vector<BenchScenario> out;
  out.reserve(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    BenchScenario s = defaults;
    apply_object(s, list[i], At{origin, fmt::format("scenarios[{}]", i)});
    if (s.name.empty()) s.name = cell_name(s);
    out.push_back(s);
  }
  return out;
}

// What no single key can say: unique names, shards where data is "shards", fp16 only on CUDA.
void check_scenarios(const BenchConfig& config, const std::string& origin) {
  if (config.scenarios.empty()) throw ConfigError(origin + ": no scenarios (give \"matrix\" or \"scenarios\")");
  std::set<std::string> names;
  for (const auto& s : config.scenarios) {
    if (!names.insert(s.name).second) throw ConfigError(origin + ": duplicate scenario name '" + s.name + "'");
    if (s.data == BenchData::kShards && s.shards.empty())
      throw ConfigError(origin + ": scenario '" + s.name +
                        "': data \"shards\" needs \"shards\" (a folder of prepared shards)");
    if (s.precision == Precision::kFp16 && s.device != DeviceChoice::kCuda)
      throw ConfigError(origin + ": scenario '" + s.name + "': fp16 needs device \"cuda\"");
  }
}

}  // namespace

BenchConfig parse_bench_config(const json& doc, const std::string& origin) {
  if (!doc.is_object()) throw ConfigError(origin + ": expected a JSON object");
  for (const auto& [k, v] : doc.items())
    if (std::find(kTopKeys.begin(), kTopKeys.end(), k) == kTopKeys.end())
      throw ConfigError(origin + ": unknown key '" + k + "'" + did_you_mean(k, kTopKeys));
  if (doc.contains("format") && doc["format"] != "shoplens-bench")
    throw ConfigError(origin + ": format: expected \"shoplens-bench\"");
  BenchConfig config;
  if (doc.contains("name")) {
    if (!doc["name"].is_string()) throw ConfigError(origin + ": name: expected a string");
    config.name = doc["name"].get<std::string>();
  }
  BenchScenario defaults;
  if (doc.contains("defaults")) apply_object(defaults, doc["defaults"], At{origin, "defaults"});
  if (doc.contains("matrix")) config.scenarios = matrix_scenarios(doc["matrix"], defaults, At{origin, "matrix"});
  if (doc.contains("scenarios")) {
    const auto listed = listed_scenarios(doc["scenarios"], defaults, origin);
    config.scenarios.insert(config.scenarios.end(), listed.begin(), listed.end());
  }
  check_scenarios(config, origin);
  return config;
}

BenchConfig load_bench_config(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw ConfigError("bench config " + path.string() + " does not exist");
  const std::string text = read_file(path);
  if (json_nesting_exceeds(text))
    throw ConfigError(path.string() + ": nests deeper than " + std::to_string(kMaxJsonNesting) + " levels");
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    throw ConfigError(path.string() + ": not valid JSON: " + e.what());
  }
  return parse_bench_config(doc, path.string());
}

double relative_range(const std::vector<double>& values) {
  if (values.size() < 2) return 0;
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  const double mid = median(values);
  return mid > 0 ? (*hi - *lo) / mid : 0;
}

ScenarioSummary summarise(const ScenarioResult& r) {
  ScenarioSummary s;
  s.images_per_second = median(r.trial_images_per_second);
  s.tokens_per_second = median(r.trial_tokens_per_second);
  s.noise = relative_range(r.trial_images_per_second);
  s.step_p50 = percentile(r.step_seconds, 0.50);
  s.step_p95 = percentile(r.step_seconds, 0.95);
  s.step_p99 = percentile(r.step_seconds, 0.99);
  double wait = 0, window = 0;
  for (double w : r.trial_data_wait_seconds) wait += w;
  for (double t : r.trial_seconds) window += t;
  s.data_wait_fraction = window > 0 ? wait / window : 0;
  s.data_wait_seconds = median(r.trial_data_wait_seconds);
  s.cpu_utilisation = window > 0 ? r.cpu_seconds / window : 0;
  if (!r.gpu_samples.empty()) {
    double sum = 0;
    s.gpu_util_max = 0;
    s.gpu_memory_max_bytes = 0;
    for (const auto& g : r.gpu_samples) {
      sum += g.utilisation;
      s.gpu_util_max = std::max(s.gpu_util_max, g.utilisation);
      s.gpu_memory_max_bytes = std::max(s.gpu_memory_max_bytes, g.memory_used_bytes);
    }
    s.gpu_util_mean = sum / static_cast<double>(r.gpu_samples.size());
  }
  return s;
}

const std::vector<std::string>& recorder_record_keys() {
  static const std::vector<std::string> keys = {"bench",
                                                "image_size",
                                                "num_classes",
                                                "threads",
                                                "trials",
                                                "warmup_steps",
                                                "steps",
                                                "batch_source",
                                                "data",
                                                "optimizer",
                                                "optimizer_impl",
                                                "channels_last",
                                                "device_name",
                                                "noise",
                                                "trial_images_per_second",
                                                "trial_images_per_cpu_second",
                                                "step_ms_p50",
                                                "step_ms_p95",
                                                "step_ms_p99",
                                                "data_wait_seconds",
                                                "data_wait_fraction",
                                                "peak_rss_bytes",
                                                "peak_rss_scope",
                                                "peak_allocated_bytes",
                                                "peak_reserved_bytes",
                                                "cpu_utilisation",
                                                "gpu",
                                                "gpu_util_mean",
                                                "gpu_util_max",
                                                "gpu_memory_max_bytes",
                                                "gpu_samples",
                                                "trial_gpu",
                                                "throttled_trials",
                                                "commit",
                                                "torch",
                                                "driver",
                                                "cpu",
                                                "host",
                                                "usable_cores",
                                                "load_average",
                                                "status",
                                                "error",
                                                "name",
                                                "seq_len",
                                                "vocab_size",
                                                "tokens_per_second",
                                                "trial_tokens_per_second",
                                                "padding_fraction",
                                                "samples_per_second"};
  return keys;
}

namespace {

// recommend's fields first (docs/COMPUTE.md, "Bench records").
void add_recommend_fields(json& j, const ScenarioResult& r, const ScenarioSummary& s, const BenchEnvironment& env,
                          const std::string& source) {
  const auto& sc = r.scenario;
  const bool cuda = sc.device == DeviceChoice::kCuda;
  j["scenario"] = sc.recommend_scenario.empty() ? sc.name : sc.recommend_scenario;
  j["name"] = sc.name;
  j["model"] = sc.model;
  j["device"] = cuda ? "gpu" : "cpu";
  j["hardware"] = !sc.hardware.empty() ? sc.hardware : (cuda ? env.device_name : env.cpu_model);
  j["devices"] = 1;
  j["vcpus"] = std::max(1, r.threads);
  j["precision"] = precision_name(sc.precision);
  j["batch"] = r.batch;
  j["source"] = source;
  j["date"] = env.date;
  j["status"] = r.error.empty() ? "ok" : "failed";
  if (!r.error.empty()) j["error"] = r.error;
  // recommend refuses a non-positive rate: a failed scenario has none, so it carries no field.
  if (s.images_per_second > 0) j["images_per_second"] = s.images_per_second;
}

void add_scenario_fields(json& j, const ScenarioResult& r, const ScenarioSummary& s) {
  const auto& sc = r.scenario;
  j["batch_source"] = sc.batch_auto ? "auto" : "fixed";
  j["data"] = name_in(kBenchDataNames, sc.data);
  j["image_size"] = sc.image_size;
  j["num_classes"] = sc.num_classes;
  j["optimizer"] = name_in(kOptimizerKindNames, sc.optimizer);
  j["optimizer_impl"] = name_in(kOptimizerImplNames, sc.optimizer_impl);
  j["channels_last"] = sc.channels_last;
  j["threads"] = r.threads;
  j["trials"] = sc.trials;
  j["warmup_steps"] = sc.warmup_steps;
  j["steps"] = sc.steps;
  j["trial_images_per_second"] = r.trial_images_per_second;
  // Images per CPU-second per trial: what `bench --against-results --time-metric cpu` compares.
  json per_cpu_second = json::array();
  for (double cpu : r.trial_cpu_seconds) per_cpu_second.push_back(cpu > 0 ? r.batch * sc.steps / cpu : 0.0);
  j["trial_images_per_cpu_second"] = per_cpu_second;
  if (!r.text) return;
  // images_per_second stays the rate recommend reads; for text it counts samples.
  if (s.images_per_second > 0) j["samples_per_second"] = s.images_per_second;
  j["seq_len"] = sc.seq_len;
  j["vocab_size"] = sc.vocab_size;
  if (s.tokens_per_second > 0) j["tokens_per_second"] = s.tokens_per_second;
  j["trial_tokens_per_second"] = r.trial_tokens_per_second;
  j["padding_fraction"] = r.padding_fraction;
}

// Per trial: the lowest clocks, mean power, hottest temperature and the throttle reasons NVML saw.
void add_trial_gpu(json& j, const ScenarioResult& r) {
  if (r.trial_gpu.empty()) return;
  json trials = json::array();
  for (const auto& g : r.trial_gpu)
    trials.push_back({{"samples", g.samples},
                      {"sm_clock_mhz_min", g.sm_clock_mhz_min},
                      {"memory_clock_mhz_min", g.memory_clock_mhz_min},
                      {"power_watts_mean", g.power_watts_mean},
                      {"temperature_c_max", g.temperature_c_max},
                      {"throttle_reasons", throttle_reason_names(g.throttle_reasons)},
                      {"throttled", g.throttled()}});
  j["trial_gpu"] = trials;
}

void add_measurement_fields(json& j, const ScenarioResult& r, const ScenarioSummary& s) {
  j["noise"] = s.noise;
  j["step_ms_p50"] = s.step_p50 * 1e3;
  j["step_ms_p95"] = s.step_p95 * 1e3;
  j["step_ms_p99"] = s.step_p99 * 1e3;
  j["data_wait_seconds"] = s.data_wait_seconds;
  j["data_wait_fraction"] = s.data_wait_fraction;
  j["peak_rss_bytes"] = r.peak_rss_bytes;
  j["peak_rss_scope"] = r.peak_rss_scoped ? "scenario" : "process";
  j["peak_allocated_bytes"] = r.peak_allocated_bytes;
  j["peak_reserved_bytes"] = r.peak_reserved_bytes;
  j["cpu_utilisation"] = s.cpu_utilisation;
  j["gpu"] = r.gpu_status;
  j["throttled_trials"] = r.throttled_trials();
  add_trial_gpu(j, r);
  if (r.gpu_samples.empty()) return;
  j["gpu_util_mean"] = s.gpu_util_mean;
  j["gpu_util_max"] = s.gpu_util_max;
  j["gpu_memory_max_bytes"] = s.gpu_memory_max_bytes;
  json samples = json::array();
  for (const auto& g : r.gpu_samples) samples.push_back({g.t, g.utilisation, g.memory_used_bytes});
  j["gpu_samples"] = samples;  // [seconds, utilisation %, memory used bytes]
}

void add_environment_fields(json& j, const ScenarioResult& r, const BenchEnvironment& env) {
  j["device_name"] = r.scenario.device == DeviceChoice::kCuda ? env.device_name : "cpu";
  j["driver"] = env.driver;
  j["cpu"] = env.cpu_model;
  j["usable_cores"] = env.usable_cores;
  j["load_average"] = env.load_average;
  j["commit"] = env.commit;
  j["torch"] = env.torch_version;
  j["host"] = env.hostname;
  j["bench"] = "shoplens bench";
}

}  // namespace

json result_to_json(const ScenarioResult& r, const BenchEnvironment& env, const std::string& source) {
  const ScenarioSummary s = summarise(r);
  json j;
  add_recommend_fields(j, r, s, env, source);
  add_scenario_fields(j, r, s);
  add_measurement_fields(j, r, s);
  add_environment_fields(j, r, env);
  return j;
}

std::string results_jsonl(const std::vector<ScenarioResult>& results, const BenchEnvironment& env,
                          const std::string& source) {
  std::string out;
  for (const auto& r : results) out += result_to_json(r, env, source).dump() + "\n";
  return out;
}

std::string results_csv(const std::vector<ScenarioResult>& results, const BenchEnvironment& env) {
  std::ostringstream os;
  os << "scenario,status,model,precision,batch,batch_source,device,threads,data,images_per_second,noise,trials,"
        "step_ms_p50,step_ms_p95,step_ms_p99,data_wait_fraction,peak_rss_mib,peak_allocated_mib,peak_reserved_mib,"
        "cpu_utilisation,gpu,gpu_util_mean,gpu_memory_max_mib,device_name,driver,cpu,torch,commit,date,tokens_per_"
        "second,"
        "padding_fraction,throttled_trials\n";
  for (const auto& r : results) {
    const auto& sc = r.scenario;
    const auto s = summarise(r);
    const std::vector<std::string> row = {sc.name,
                                          r.error.empty() ? "ok" : "failed",
                                          sc.model,
                                          precision_name(sc.precision),
                                          std::to_string(r.batch),
                                          sc.batch_auto ? "auto" : "fixed",
                                          device_choice_name(sc.device),
                                          std::to_string(r.threads),
                                          name_in(kBenchDataNames, sc.data),
                                          num(s.images_per_second, 6),
                                          num(s.noise),
                                          std::to_string(r.trial_images_per_second.size()),
                                          num(s.step_p50 * 1e3),
                                          num(s.step_p95 * 1e3),
                                          num(s.step_p99 * 1e3),
                                          num(s.data_wait_fraction),
                                          mib(static_cast<double>(r.peak_rss_bytes)),
                                          mib(static_cast<double>(r.peak_allocated_bytes)),
                                          mib(static_cast<double>(r.peak_reserved_bytes)),
                                          num(s.cpu_utilisation),
                                          r.gpu_status,
                                          s.gpu_util_mean < 0 ? "" : num(s.gpu_util_mean),
                                          mib(s.gpu_memory_max_bytes),
                                          sc.device == DeviceChoice::kCuda ? env.device_name : "cpu",
                                          env.driver,
                                          env.cpu_model,
                                          env.torch_version,
                                          env.commit,
                                          env.date,
                                          r.text ? num(s.tokens_per_second, 6) : "",
                                          r.text && r.padding_fraction >= 0 ? num(r.padding_fraction) : "",
                                          std::to_string(r.throttled_trials())};
    for (std::size_t i = 0; i < row.size(); ++i) os << (i ? "," : "") << csv_cell(row[i]);
    os << "\n";
  }
  return os.str();
}

std::string results_markdown(const std::vector<ScenarioResult>& results, const BenchEnvironment& env,
                             const std::vector<GateVerdict>& gate) {
  std::ostringstream os;
  os << "# shoplens bench\n\n";
  os << fmt::format("- commit `{}`, LibTorch {}, {}\n", env.commit, env.torch_version, env.date);
  os << fmt::format("- CPU: {} ({} usable cores, load average {} at the start); GPU: {} (driver {})\n\n",
                    md_cell(env.cpu_model), env.usable_cores, env.load_average.empty() ? "unknown" : env.load_average,
                    env.device_name.empty() ? "none" : md_cell(env.device_name), env.driver);
  const bool gated = !gate.empty();
  os << "| scenario | batch | threads | data | images/s | noise | step p50 ms | p95 | p99 | data wait | peak RSS MiB | "
        "peak alloc MiB | CPU busy | GPU util | status |"
     << (gated ? " vs baseline |" : "") << "\n";
  os << "|---|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|" << (gated ? "---|" : "") << "\n";
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    const auto s = summarise(r);
    os << "| " << md_cell(r.scenario.name) << " | " << r.batch << (r.scenario.batch_auto ? " (auto)" : "") << " | "
       << r.threads << " | " << md_cell(data_cell(r)) << " | " << fmt::format("{:.1f}", s.images_per_second) << " | "
       << fmt::format("{:.1f}%", s.noise * 100) << " | " << fmt::format("{:.1f}", s.step_p50 * 1e3) << " | "
       << fmt::format("{:.1f}", s.step_p95 * 1e3) << " | " << fmt::format("{:.1f}", s.step_p99 * 1e3) << " | "
       << fmt::format("{:.1f}%", s.data_wait_fraction * 100) << " | " << mib(static_cast<double>(r.peak_rss_bytes))
       << " | " << mib(static_cast<double>(r.peak_allocated_bytes)) << " | " << fmt::format("{:.2f}", s.cpu_utilisation)
       << " | " << (s.gpu_util_mean < 0 ? r.gpu_status : fmt::format("{:.0f}%", s.gpu_util_mean)) << " | "
       << (r.error.empty() ? "ok" : "failed: " + md_cell(r.error)) << throttled_note(r) << " |";
    if (gated) {
      const auto& g = gate[i];
      os << " "
         << (!g.compared ? "not compared" : fmt::format("{:+.1f}%{}", g.change * 100, g.regressed ? " REGRESSED" : ""))
         << " |";
    }
    os << "\n";
  }
  os << "\nimages/s: median over trials; noise: (max - min) / median of the trial rates; step times: "
        "percentiles over every measured step; CPU busy: cores used on average (user + system time / wall).\n";
  return os.str();
}

std::string results_junit(const std::vector<ScenarioResult>& results, const std::vector<GateVerdict>& gate,
                          const std::string& suite_name) {
  int failures = 0, errors = 0;
  double total = 0;
  for (std::size_t i = 0; i < results.size(); ++i) {
    if (!results[i].error.empty())
      ++errors;
    else if (i < gate.size() && gate[i].regressed)
      ++failures;
    for (double t : results[i].trial_seconds) total += t;
  }
  std::ostringstream os;
  os << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  os << fmt::format("<testsuites name=\"shoplens bench\" tests=\"{}\" failures=\"{}\" errors=\"{}\" time=\"{:.3f}\">\n",
                    results.size(), failures, errors, total);
  os << fmt::format("  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" time=\"{:.3f}\">\n",
                    xml_escape(suite_name), results.size(), failures, errors, total);
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    double t = 0;
    for (double x : r.trial_seconds) t += x;
    const auto s = summarise(r);
    os << fmt::format("    <testcase classname=\"bench.{}\" name=\"{}\" time=\"{:.3f}\">\n", xml_escape(suite_name),
                      xml_escape(r.scenario.name), t);
    if (!r.error.empty()) {
      os << fmt::format("      <error message=\"{}\" type=\"ScenarioFailed\"/>\n", xml_escape(r.error));
    } else if (i < gate.size() && gate[i].regressed) {
      os << fmt::format("      <failure message=\"{}\" type=\"Regression\">{}</failure>\n", xml_escape(gate[i].message),
                        xml_escape(gate[i].message));
    }
    os << fmt::format(
        "      <system-out>images/s {:.2f} (noise {:.1f}%), step p50 {:.2f} ms p95 {:.2f} ms p99 {:.2f} ms{}"
        "</system-out>\n",
        s.images_per_second, s.noise * 100, s.step_p50 * 1e3, s.step_p95 * 1e3, s.step_p99 * 1e3,
        xml_escape(throttled_note(r)));
    os << "    </testcase>\n";
  }
  os << "  </testsuite>\n</testsuites>\n";
  return os.str();
}

std::map<std::string, BaselineEntry> parse_baseline(std::string_view text, const std::string& origin) {
  std::map<std::string, BaselineEntry> out;
  for_each_json_line<ConfigError>(text, origin, [&](const json& j, const std::string& where) {
    // The recorder's own scenario name is "name"; a plain recommend record only has "scenario".
    const json& key = j.contains("name") ? j["name"] : j.contains("scenario") ? j["scenario"] : json();
    if (!key.is_string() || key.get<std::string>().empty())
      throw ConfigError(where + ": missing \"name\" or \"scenario\"");
    if (j.value("status", "ok") != "ok") return;  // a failed scenario has no figure to compare against
    if (!j.contains("images_per_second") || !j["images_per_second"].is_number() ||
        !(j["images_per_second"].get<double>() > 0))
      throw ConfigError(where + ": \"images_per_second\" must be a number > 0");
    BaselineEntry e;
    e.images_per_second = j["images_per_second"].get<double>();
    e.origin = where;
    if (j.contains("peak_rss_bytes") && j["peak_rss_bytes"].is_number_integer())
      e.peak_rss_bytes = j["peak_rss_bytes"].get<std::int64_t>();
    if (j.contains("peak_allocated_bytes") && j["peak_allocated_bytes"].is_number_integer())
      e.peak_allocated_bytes = j["peak_allocated_bytes"].get<std::int64_t>();
    if (j.contains("trial_images_per_cpu_second") && j["trial_images_per_cpu_second"].is_array())
      for (const auto& v : j["trial_images_per_cpu_second"])
        if (v.is_number()) e.trial_images_per_cpu_second.push_back(v.get<double>());
    if (j.contains("throttled_trials") && j["throttled_trials"].is_number_integer())
      e.throttled_trials = j["throttled_trials"].get<int>();
    if (j.contains("cpu_utilisation") && j["cpu_utilisation"].is_number())
      e.cpu_utilisation = j["cpu_utilisation"].get<double>();
    if (j.contains("trial_images_per_second")) {
      if (!j["trial_images_per_second"].is_array())
        throw ConfigError(where + ": \"trial_images_per_second\" must be a list");
      for (const auto& v : j["trial_images_per_second"]) {
        if (!v.is_number()) throw ConfigError(where + ": \"trial_images_per_second\" must hold numbers");
        e.trial_images_per_second.push_back(v.get<double>());
      }
    }
    out[key.get<std::string>()] = e;
  });
  return out;
}

std::map<std::string, BaselineEntry> load_baseline(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw ConfigError("baseline " + path.string() + " does not exist");
  auto entries = parse_baseline(read_file(path), path.string());
  if (entries.empty()) throw ConfigError("baseline " + path.string() + " holds no scenario results");
  return entries;
}

double parse_max_regression(const std::string& text) {
  const std::string t(trim(text));
  const bool percent = !t.empty() && t.back() == '%';
  const std::string number = percent ? t.substr(0, t.size() - 1) : t;
  double v = 0;
  std::size_t used = 0;
  try {
    v = std::stod(number, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != number.size() || !std::isfinite(v) || v < 0)
    throw UsageError("--max-regression '" + text + "': expected a percentage like 5% (or a fraction like 0.05)");
  const double fraction = (percent || v >= 1) ? v / 100.0 : v;
  if (fraction >= 1) throw UsageError("--max-regression '" + text + "': must be below 100%");
  return fraction;
}

GateVerdict gate_one(const std::string& scenario, double current, const std::vector<double>& current_trials,
                     const BaselineEntry& baseline, double max_regression) {
  GateVerdict g;
  g.scenario = scenario;
  g.compared = baseline.images_per_second > 0 && current > 0;
  if (!g.compared) return g;
  g.baseline = baseline.images_per_second;
  g.current = current;
  g.change = (current - baseline.images_per_second) / baseline.images_per_second;
  g.noise = std::max(relative_range(current_trials), relative_range(baseline.trial_images_per_second));
  const double drop = -g.change;
  g.regressed = drop > max_regression && drop > g.noise;
  g.message = fmt::format("{}: {:.2f} images/s vs baseline {:.2f} ({:+.1f}%; threshold {:.1f}%, trial noise {:.1f}%)",
                          scenario, current, g.baseline, g.change * 100, max_regression * 100, g.noise * 100);
  return g;
}

std::vector<GateVerdict> gate_results(const std::vector<ScenarioResult>& results,
                                      const std::map<std::string, BaselineEntry>& baseline, double max_regression) {
  std::vector<GateVerdict> out;
  for (const auto& r : results) {
    auto it = baseline.find(r.scenario.name);
    if (it == baseline.end() || !r.error.empty()) {
      GateVerdict g;
      g.scenario = r.scenario.name;
      g.message =
          r.error.empty() ? r.scenario.name + ": not in the baseline" : r.scenario.name + ": failed, not compared";
      out.push_back(g);
      continue;
    }
    out.push_back(gate_one(r.scenario.name, median(r.trial_images_per_second), r.trial_images_per_second, it->second,
                           max_regression));
  }
  return out;
}

BenchEnvironment host_environment() {
  BenchEnvironment env;
  env.commit = build_commit();
  env.torch_version = torch_version();
  env.cpu_model = cpu_model();
  env.usable_cores = usable_cores();
  env.date = today_date();
  env.cuda_compiled = cuda_available();
  if (std::ifstream load("/proc/loadavg"); load) {
    std::string a, b, c;
    if (load >> a >> b >> c) env.load_average = a + " " + b + " " + c;
  }
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) env.hostname = host;
  return env;
}

}  // namespace shoplens
