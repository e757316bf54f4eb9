#include "shoplens/bench/compute_plan.h"
#include "shoplens/bench/bench_results.h"

#include <algorithm>
#include <optional>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/json_fields.h"
#include "shoplens/core/json_lines.h"
#include "shoplens/core/plural.h"
#include "shoplens/core/strings.h"

namespace shoplens {
namespace {

using json = nlohmann::json;

const std::vector<std::string> kRecordKeys = {
    "scenario",  "model",  "device", "hardware", "devices", "vcpus", "images_per_second",
    "precision", "source", "date",   "estimate", "batch",   "note"};

std::string money(double v) { return v < 100 ? fmt::format("{:.2f}", v) : fmt::format("{:.0f}", v); }

std::string hours_text(double h) { return h < 1 ? fmt::format("{:.0f} min", h * 60) : fmt::format("{:.1f} h", h); }

}  // namespace

namespace {

ThroughputRecord record_from_json(const json& j, const std::string& where) {
  const JsonFields<DataError> read(j, where);  // DataError naming `where` (file:line) and the field
  ThroughputRecord r;
  r.origin = where;
  r.scenario = read.text("scenario", true);
  r.model = read.text("model", false);
  r.device = read.text("device", true);
  if (r.device != "cpu" && r.device != "gpu" && r.device != "tpu")
    read.fail("\"device\" '" + r.device + "': expected cpu, gpu or tpu");
  r.hardware = read.text("hardware", true);
  r.precision = read.text("precision", false);
  r.source = read.text("source", true);
  r.date = read.text("date", true);
  r.images_per_second = read.positive("images_per_second");
  r.devices = read.whole_number("devices", 1, 1);
  r.vcpus = read.whole_number("vcpus", 1, 0);
  if (r.device == "cpu" && r.vcpus < 1) read.fail("a cpu record needs \"vcpus\" (the cores it ran on)");
  if (j.contains("estimate")) {
    if (!j["estimate"].is_boolean()) read.fail("\"estimate\" must be true or false");
    r.estimate = j["estimate"].get<bool>();
  }
  return r;
}

}  // namespace

std::vector<ThroughputRecord> parse_bench_records(std::string_view text, const std::string& origin) {
  std::vector<ThroughputRecord> out;
  for_each_json_line<DataError>(text, origin, [&](const json& j, const std::string& where) {
    for (const auto& [key, value] : j.items())
      if (std::find(kRecordKeys.begin(), kRecordKeys.end(), key) == kRecordKeys.end() &&
          std::find(recorder_record_keys().begin(), recorder_record_keys().end(), key) == recorder_record_keys().end())
        throw DataError(where + ": unknown field '" + key + "'" + did_you_mean(key, kRecordKeys));
    // `shoplens bench` writes failed scenarios too (no throughput): nothing to plan with.
    if (j.contains("status") && j["status"] == "failed") return;
    out.push_back(record_from_json(j, where));
  });
  return out;
}

std::vector<ThroughputRecord> load_bench_records(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw DataError("bench results " + path.string() + " do not exist");
  auto records = parse_bench_records(read_file(path), path.string());
  if (records.empty()) throw DataError("bench results " + path.string() + " hold no records");
  return records;
}

ScalingModel ScalingModel::defaults() {
  ScalingModel m;
  m.points_ = {{1, 1.0}, {2, 0.95}, {4, 0.90}, {8, 0.84}, {16, 0.80}, {32, 0.75}};
  return m;
}

ScalingModel ScalingModel::parse(std::string_view spec) {
  ScalingModel m = defaults();
  for (const auto& part : split(spec, ',')) {
    const auto item = trim(part);
    if (item.empty()) continue;
    const auto kv = split(item, ':');
    try {
      if (kv.size() != 2) throw std::invalid_argument("form");
      std::size_t used_n = 0, used_e = 0;
      const int n = std::stoi(kv[0], &used_n);
      const double e = std::stod(kv[1], &used_e);
      if (used_n != kv[0].size() || used_e != kv[1].size() || n < 1 || !(e > 0 && e <= 1))
        throw std::invalid_argument("range");
      m.points_[n] = e;
    } catch (const std::exception&) {
      throw UsageError(fmt::format(
          "--scaling '{}': expected DEVICES:EFFICIENCY pairs like 8:0.84 with 0 < efficiency <= 1", std::string(item)));
    }
  }
  m.points_[1] = 1.0;  // one device is the reference by definition
  return m;
}

double ScalingModel::efficiency(int devices) const {
  if (devices <= 1) return 1.0;
  auto hi = points_.lower_bound(devices);
  if (hi == points_.end()) return std::prev(hi)->second;
  if (hi->first == devices || hi == points_.begin()) return hi->second;
  auto lo = std::prev(hi);
  const double t = (std::log2(devices) - std::log2(lo->first)) / (std::log2(hi->first) - std::log2(lo->first));
  return lo->second + t * (hi->second - lo->second);
}

double relative_speed(const std::string& hardware) {
  // ResNet-50 mixed-precision training, A100 = 1: DeepLearningExamples (A100 2,470 img/s, V100
  // 1,200), MLPerf Training (H100 about 2x A100); T4, L4 and TPU v5e are coarser (docs/COMPUTE.md).
  static const std::map<std::string, double> table = {{"T4-16GB", 0.10},   {"L4-24GB", 0.20},      {"V100-16GB", 0.49},
                                                      {"A10G-24GB", 0.30}, {"RTX3090-24GB", 0.49}, {"A100-40GB", 1.0},
                                                      {"A100-80GB", 1.05}, {"H100-80GB", 2.0},     {"TPU-v5e", 0.80}};
  const auto it = table.find(hardware);
  return it == table.end() ? 0.0 : it->second;
}

double parse_hours(std::string_view text) {
  const std::string s(trim(text));
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string unit = s.substr(used);
  double scale = 0;
  if (unit.empty() || unit == "h")
    scale = 1;
  else if (unit == "m" || unit == "min")
    scale = 1.0 / 60;
  else if (unit == "s")
    scale = 1.0 / 3600;
  else if (unit == "d")
    scale = 24;
  if (used == 0 || scale == 0 || !(v > 0) || !std::isfinite(v))
    throw UsageError(fmt::format("duration '{}': expected e.g. 8h, 90m, 2d or a number of hours > 0", s));
  return v * scale;
}

namespace {

using Records = std::vector<const ThroughputRecord*>;

// Measured beats published; then the record closest to the wanted device count.
bool better_record(const ThroughputRecord* a, const ThroughputRecord* b, int want) {
  if (a->estimate != b->estimate) return !a->estimate;
  return std::abs(a->devices - want) < std::abs(b->devices - want);
}

double per_device_rate(const ThroughputRecord& r, const ScalingModel& scaling) {
  return r.images_per_second / (r.devices * scaling.efficiency(r.devices));
}

// Linear in cores: optimistic beyond the measured count, hence an estimate when it scales.
void cpu_throughput(PlanOption& o, const PriceOffer& offer, const ThroughputRecord& best) {
  o.images_per_second = best.images_per_second / best.vcpus * offer.vcpus;
  o.estimate = best.estimate || offer.vcpus != best.vcpus;
  o.confidence = offer.vcpus != best.vcpus ? 2 : best.estimate ? 1 : 0;
  o.derivation = offer.vcpus == best.vcpus
                     ? fmt::format("{} {:.1f} img/s on {} cores ({})", best.estimate ? "published" : "measured",
                                   best.images_per_second, best.vcpus, best.origin)
                     : fmt::format("{:.1f} img/s on {} cores scaled linearly to {} ({})", best.images_per_second,
                                   best.vcpus, offer.vcpus, best.origin);
}

void accelerator_throughput(PlanOption& o, const ThroughputRecord& best, const ScalingModel& scaling) {
  o.images_per_second = per_device_rate(best, scaling) * o.devices * scaling.efficiency(o.devices);
  o.estimate = best.estimate;
  o.confidence = best.estimate ? 1 : 0;
  o.derivation =
      best.devices == o.devices
          ? fmt::format("{} {:.0f} img/s on {} x {} ({})", best.estimate ? "published" : "measured",
                        best.images_per_second, best.devices, best.hardware, best.origin)
          : fmt::format("{:.0f} img/s on {} x {} -> {} devices at efficiency {:.2f} ({})", best.images_per_second,
                        best.devices, best.hardware, o.devices, scaling.efficiency(o.devices), best.origin);
}

// No figure for this hardware: another accelerator's, times the relative speed table. False
// when there is no basis for an estimate.
bool derived_throughput(PlanOption& o, const PriceOffer& offer, const Records& mine, const ScalingModel& scaling) {
  const double rel = relative_speed(offer.accelerator);
  const ThroughputRecord* ref = nullptr;
  for (const ThroughputRecord* r : mine)
    if (r->device != "cpu" && relative_speed(r->hardware) > 0 && (!ref || better_record(r, ref, 1))) ref = r;
  if (rel <= 0 || !ref) return false;
  o.images_per_second =
      per_device_rate(*ref, scaling) * rel / relative_speed(ref->hardware) * o.devices * scaling.efficiency(o.devices);
  o.estimate = true;
  o.confidence = 2;
  o.derivation = fmt::format(
      "estimate: {} per-device rate x relative speed {:.2f}/{:.2f}{} ({})", ref->hardware, rel,
      relative_speed(ref->hardware),
      o.devices > 1 ? fmt::format(" x {} devices at efficiency {:.2f}", o.devices, scaling.efficiency(o.devices)) : "",
      ref->origin);
  return true;
}

// One priced offer as an option, or the reason it is left out.
std::optional<PlanOption> price_offer(const PriceOffer& offer, const Records& mine, const ScalingModel& scaling,
                                      const PlanRequest& req, std::vector<std::string>& left_out) {
  if (req.basis == PriceBasis::kSpot && !offer.spot_per_hour) return std::nullopt;
  PlanOption o;
  o.offer = offer.name;
  o.kind = offer.kind;
  o.hardware = offer.kind == "cpu" ? fmt::format("{} vCPU", offer.vcpus) : offer.accelerator;
  o.devices = offer.devices();
  o.price_per_hour = offer.per_hour(req.basis);
  const ThroughputRecord* best = nullptr;
  for (const ThroughputRecord* r : mine) {
    const bool match =
        offer.kind == "cpu" ? r->device == "cpu" : (r->device == offer.kind && r->hardware == offer.accelerator);
    if (match && (!best || better_record(r, best, o.devices))) best = r;
  }
  if (offer.kind == "cpu") {
    if (!best || offer.vcpus < 1) {
      left_out.push_back(fmt::format("{}: no CPU record for '{}'; left out", offer.name, req.scenario));
      return std::nullopt;
    }
    cpu_throughput(o, offer, *best);
  } else if (best) {
    accelerator_throughput(o, *best, scaling);
  } else if (!derived_throughput(o, offer, mine, scaling)) {
    left_out.push_back(
        fmt::format("{}: no throughput for {} and no basis to estimate one; left out", offer.name, offer.accelerator));
    return std::nullopt;
  }
  const double images = req.dataset_size * req.epochs;
  o.runnable = offer.kind != "tpu";
  o.hours = images / o.images_per_second / 3600.0;
  o.cost = o.hours * o.price_per_hour;
  o.meets_deadline = req.deadline_hours <= 0 || o.hours <= req.deadline_hours;
  o.meets_budget = req.budget <= 0 || o.cost <= req.budget;
  return o;
}

void mark_pareto(std::vector<PlanOption>& options) {
  for (auto& a : options) {
    a.pareto = true;
    for (const auto& b : options)
      if (&a != &b && b.hours <= a.hours && b.cost <= a.cost && (b.hours < a.hours || b.cost < a.cost))
        a.pareto = false;
  }
}

// A TPU that would fit is named, then the offers left out: the end of the reasoning.
void explain_the_rest(Plan& plan, const std::vector<std::string>& left_out) {
  for (const auto& o : plan.options)
    if (!o.runnable && o.meets_deadline && o.meets_budget) {
      plan.reasoning.push_back(
          fmt::format("{} would fit ({}, {} per run, estimated) but TPUs have no LibTorch backend: it "
                      "needs a PyTorch/XLA or JAX port, so it is listed for comparison only",
                      o.offer, hours_text(o.hours), money(o.cost)));
      break;
    }
  plan.reasoning.insert(plan.reasoning.end(), left_out.begin(), left_out.end());
}

void explain_nothing_fits(Plan& plan, const PlanRequest& req) {
  const auto& opts = plan.options;
  const auto fastest = std::min_element(opts.begin(), opts.end(), [](auto& a, auto& b) { return a.hours < b.hours; });
  const auto cheapest = opts.begin();  // sorted by cost
  plan.reasoning.push_back(fmt::format(
      "nothing meets {}{}{}: the fastest option, {}, takes {} for {}; the cheapest, {}, costs {} and takes {}",
      req.deadline_hours > 0 ? "the deadline of " + hours_text(req.deadline_hours) : "",
      req.deadline_hours > 0 && req.budget > 0 ? " and " : "",
      req.budget > 0 ? "the budget of " + money(req.budget) : "", fastest->offer, hours_text(fastest->hours),
      money(fastest->cost), cheapest->offer, money(cheapest->cost), hours_text(cheapest->hours)));
}

// The cheapest feasible option, unless a better-founded one (measured over published over
// derived) costs at most 25% more: a guessed throughput should not win a close call.
int recommend(Plan& plan, const std::vector<int>& feasible) {
  const auto& opts = plan.options;
  const int cheapest = feasible.front();
  int rec = cheapest;
  for (int i : feasible)
    if (opts[i].confidence < opts[rec].confidence && opts[i].cost <= 1.25 * opts[cheapest].cost) rec = i;
  if (rec != cheapest)
    plan.reasoning.push_back(
        fmt::format("{} is cheaper on paper ({}) but its throughput is {}; {} is {} and within 25%",
                    opts[cheapest].offer, money(opts[cheapest].cost),
                    opts[cheapest].confidence == 2 ? "derived from other hardware" : "a published figure",
                    opts[rec].offer, opts[rec].confidence == 0 ? "measured" : "a published figure"));
  const auto& r = opts[rec];
  plan.reasoning.insert(plan.reasoning.begin(),
                        fmt::format("recommended: {} ({} x {}): {} and {} per run, the cheapest of the {} that "
                                    "meet the constraints{}",
                                    r.offer, r.devices, r.hardware, hours_text(r.hours), money(r.cost),
                                    count_of(static_cast<std::int64_t>(feasible.size()), "option"),
                                    r.estimate ? " (throughput not measured here: measure it before committing)" : ""));
  return rec;
}

// The lightest other feasible instance (lowest price per hour), i.e. the one most likely to have
// capacity when the recommended one does not. -1 when there is none.
int choose_fallback(Plan& plan, const std::vector<int>& feasible, int rec) {
  const auto& opts = plan.options;
  int fb = -1;
  for (int i : feasible)
    if (i != rec && (fb < 0 || opts[i].price_per_hour < opts[fb].price_per_hour)) fb = i;
  if (fb < 0) {
    plan.reasoning.push_back("no fallback: only one option meets the constraints");
    return fb;
  }
  plan.reasoning.push_back(
      fmt::format("fallback: {} ({} x {}): {} and {} per run; {}/h instead of {}/h, a smaller "
                  "instance to use when the recommended one has no capacity",
                  opts[fb].offer, opts[fb].devices, opts[fb].hardware, hours_text(opts[fb].hours), money(opts[fb].cost),
                  money(opts[fb].price_per_hour), money(opts[rec].price_per_hour)));
  return fb;
}

}  // namespace

Plan plan_compute(const std::vector<ThroughputRecord>& records, const PriceTable& prices, const ScalingModel& scaling,
                  const PlanRequest& req) {
  if (!(req.dataset_size > 0) || !(req.epochs > 0))
    throw UsageError("recommend: --dataset-size and --epochs must be > 0");
  Records mine;
  std::vector<std::string> scenarios;
  for (const auto& r : records) {
    if (r.scenario == req.scenario) mine.push_back(&r);
    if (std::find(scenarios.begin(), scenarios.end(), r.scenario) == scenarios.end()) scenarios.push_back(r.scenario);
  }
  if (mine.empty())
    throw DataError(fmt::format("recommend: no bench record for scenario '{}'{} (have: {})", req.scenario,
                                did_you_mean(req.scenario, scenarios), join(scenarios, ", ")));
  Plan plan;
  std::vector<std::string> left_out;  // reported after the decision
  for (const auto& offer : prices.offers)
    if (auto o = price_offer(offer, mine, scaling, req, left_out)) plan.options.push_back(std::move(*o));
  if (plan.options.empty())
    throw DataError("recommend: no priced offer matches a bench record of '" + req.scenario + "'");
  std::sort(plan.options.begin(), plan.options.end(), [](const PlanOption& a, const PlanOption& b) {
    return a.cost != b.cost ? a.cost < b.cost : a.hours < b.hours;
  });
  mark_pareto(plan.options);

  // Feasible: meets the deadline and the budget, and runs this program (a TPU does not).
  std::vector<int> feasible;
  for (int i = 0; i < static_cast<int>(plan.options.size()); ++i)
    if (plan.options[i].meets_deadline && plan.options[i].meets_budget && plan.options[i].runnable)
      feasible.push_back(i);
  if (feasible.empty()) {
    explain_the_rest(plan, left_out);
    explain_nothing_fits(plan, req);
    return plan;
  }
  plan.recommended = recommend(plan, feasible);
  const int fallback = choose_fallback(plan, feasible, plan.recommended);
  if (fallback >= 0) plan.fallback = fallback;
  explain_the_rest(plan, left_out);
  return plan;
}

}  // namespace shoplens
