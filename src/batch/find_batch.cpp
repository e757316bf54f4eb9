// The parts of find-batch that need no LibTorch: planning, output, fingerprint and cache.
#include "shoplens/batch/find_batch.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <sstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/hash.h"
#include "shoplens/core/json_fields.h"
#include "shoplens/core/plural.h"
#include "shoplens/core/runtime.h"
#include "shoplens/core/strings.h"

namespace shoplens {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {
constexpr int kCacheFormat = 1;  // bump when a cached answer would no longer be valid

std::string probe_outcome_name(const ProbeResult& p) {
  switch (p.outcome) {
    case ProbeResult::Outcome::kOutOfMemory:
      return "oom";
    case ProbeResult::Outcome::kFailed:
      return "failed";
    default:
      return p.fits ? "fits" : "over_budget";
  }
}

std::string mib(double bytes) { return format_bytes(bytes); }
}  // namespace

std::int64_t reference_global_batch(const Config& config) {
  return config.find_batch.reference_batch > 0
             ? config.find_batch.reference_batch
             : static_cast<std::int64_t>(config.loader.batch_size) * config.train.accumulation_steps;
}

std::string resolve_lr_scaling(const Config& config) {
  if (config.find_batch.lr_scaling != LrScaling::kAuto) return name_in(kLrScalingNames, config.find_batch.lr_scaling);
  // Linear for SGD (Goyal et al. 2017); square root for adaptive optimizers, whose update size
  // does not grow with the gradient's (Malladi et al. 2022), and which linear scaling overshoots.
  return config.optim.name == OptimizerKind::kSgd ? "linear" : "sqrt";
}

BatchPlan plan_batch(int max_micro, std::int64_t target_global, int world_size, const Config& config) {
  if (max_micro < 1) throw Error("plan_batch: no micro-batch fits");
  BatchPlan plan;
  plan.world_size = std::max(1, world_size);
  const std::int64_t per_rank_max = max_micro;
  if (target_global <= 0) {
    plan.micro_batch = max_micro;
    plan.accumulation_steps = 1;
  } else {
    const std::int64_t w = plan.world_size;
    std::int64_t k = std::max<std::int64_t>(1, (target_global + per_rank_max * w - 1) / (per_rank_max * w));
    // The fewest accumulation steps whose split is exact: the largest micro-batch that divides.
    std::int64_t exact = 0;
    for (std::int64_t kk = k; kk <= std::min<std::int64_t>(target_global, k * 4); ++kk)
      if (target_global % (kk * w) == 0) {
        exact = kk;
        break;
      }
    if (exact) {
      k = exact;
      plan.micro_batch = static_cast<int>(target_global / (k * w));
    } else {
      plan.micro_batch = static_cast<int>((target_global + k * w - 1) / (k * w));
      plan.notes.push_back(
          fmt::format("{} has no exact split into micro-batches of at most {} on {}; the global "
                      "batch is rounded up to {}",
                      target_global, max_micro, count_of(w, "rank"), plan.micro_batch * k * w));
    }
    plan.accumulation_steps = static_cast<int>(k);
  }
  plan.global_batch = static_cast<std::int64_t>(plan.micro_batch) * plan.accumulation_steps * plan.world_size;

  plan.reference_batch = reference_global_batch(config);
  plan.lr_scaling = resolve_lr_scaling(config);
  const double ratio = static_cast<double>(plan.global_batch) / static_cast<double>(plan.reference_batch);
  plan.lr_factor = plan.lr_scaling == "linear" ? ratio : plan.lr_scaling == "sqrt" ? std::sqrt(ratio) : 1.0;
  plan.lr = config.optim.lr * plan.lr_factor;
  plan.warmup_epochs = config.schedule.warmup_epochs;
  if (plan.lr_factor > 1.0 && plan.warmup_epochs < 1.0) {
    plan.warmup_epochs = 1.0;
    plan.notes.push_back("the learning rate was scaled up: warm-up lengthened to 1 epoch");
  }
  return plan;
}

PlannedSettings planned_settings(const BatchPlan& plan, int eval_batch, std::int64_t token_budget) {
  PlannedSettings s;
  s.micro_batch = plan.micro_batch;
  s.accumulation_steps = plan.accumulation_steps;
  s.eval_batch = eval_batch;
  s.lr = plan.lr;
  s.warmup_epochs = plan.warmup_epochs;
  s.epochs = plan.epochs;
  s.token_budget = token_budget;
  return s;
}

json config_patch_json(const PlannedSettings& s) {
  json loader = {{"batch_size", s.micro_batch}};
  if (s.token_budget > 0) loader["token_budget"] = s.token_budget;
  json train = {{"accumulation_steps", s.accumulation_steps}, {"eval_batch_size", s.eval_batch}};
  if (s.epochs > 0) train["epochs"] = s.epochs;
  return {{"loader", loader},
          {"train", train},
          {"optim", {{"lr", s.lr}}},
          {"schedule", {{"warmup_epochs", s.warmup_epochs}}}};
}

PlannedSettings planned_settings_from_json(const json& patch, const std::string& where) {
  const JsonFields<DataError> doc(patch, where + ": config_patch");
  const auto loader = doc.section("loader"), train = doc.section("train");
  PlannedSettings s;
  s.micro_batch = static_cast<int>(loader.integer("batch_size", 1, 1 << 20));
  s.token_budget = loader.object().contains("token_budget") ? loader.integer("token_budget", 1, INT64_MAX) : 0;
  s.accumulation_steps = static_cast<int>(train.integer("accumulation_steps", 1, 65536));
  s.eval_batch = static_cast<int>(train.integer("eval_batch_size", 0, 1 << 20));
  s.epochs = train.object().contains("epochs") ? static_cast<int>(train.integer("epochs", 1, 1000000)) : 0;
  s.lr = doc.section("optim").number_in("lr", 1e-12, 100);
  s.warmup_epochs = doc.section("schedule").number_in("warmup_epochs", 0, 1e6);
  return s;
}

void apply_planned_settings(Config& config, const PlannedSettings& s) {
  config.loader.batch_size = s.micro_batch;
  config.loader.auto_batch = false;
  if (s.token_budget > 0) config.loader.token_budget = s.token_budget;
  config.train.accumulation_steps = s.accumulation_steps;
  config.train.eval_batch_size = s.eval_batch;
  if (s.epochs > 0) config.train.epochs = s.epochs;
  config.optim.lr = s.lr;
  config.schedule.warmup_epochs = s.warmup_epochs;
}

void budget_epochs_by_time(BatchPlan& plan, double speedup, const Config& config) {
  plan.speedup = speedup > 0 ? speedup : 1.0;
  if (config.find_batch.train_budget != TrainBudget::kTime || plan.speedup <= 1.0) return;
  const int epochs = static_cast<int>(std::lround(config.train.epochs * plan.speedup));
  if (epochs <= config.train.epochs) return;
  plan.epochs = epochs;
  plan.notes.push_back(fmt::format(
      "batch {} measured {:.2f}x the images/s of batch {}: {} epochs instead of {} take about the reference batch's "
      "wall time with the optimizer steps a larger batch lacks (find_batch.train_budget=epochs keeps {})",
      plan.micro_batch, plan.speedup, plan.reference_batch, epochs, config.train.epochs, config.train.epochs));
}

json search_to_json(const SearchResult& s) {
  json probes = json::array();
  for (const auto& p : s.probes)
    probes.push_back({{"batch", p.batch},
                      {"result", probe_outcome_name(p)},
                      {"ok", p.fits},
                      {"oom", p.outcome == ProbeResult::Outcome::kOutOfMemory},
                      {"peak_bytes", p.peak_bytes},
                      {"baseline_bytes", p.baseline_bytes},
                      {"process_peak_bytes", p.process_peak_bytes},
                      {"step_spread_bytes", p.step_spread_bytes},
                      {"reserved_gap_bytes", p.reserved_gap_bytes},
                      {"inactive_split_bytes", p.inactive_split_bytes},
                      {"alloc_retries", p.alloc_retries},
                      {"steps", p.steps},
                      {"seconds", p.seconds},
                      {"images_per_second", p.images_per_second},
                      {"purpose", p.for_throughput ? "throughput" : "memory"},
                      {"error", p.error}});
  return {{"found_batch", s.batch},
          {"budget_bytes", s.budget_bytes},
          {"headroom_bytes", s.headroom_bytes},
          {"usable_bytes", s.usable_bytes},
          {"predicted_peak_bytes", s.predicted_peak_bytes},
          {"measured_peak_bytes", s.measured_peak_bytes},
          {"fit",
           {{"static_bytes", s.fit.static_bytes},
            {"bytes_per_sample", s.fit.bytes_per_sample},
            {"r2", s.fit.r2},
            {"points", s.fit.points}}},
          {"probes", probes},
          {"bisected", s.bisected},
          {"warnings", s.warnings},
          {"search_seconds", s.seconds}};
}

json FindBatchResult::to_json() const {
  json doc = search;
  doc["micro_batch"] = micro_batch;
  doc["planned_micro_batch"] = plan.micro_batch;
  if (throughput_batch > 0) doc["throughput_batch"] = throughput_batch;  // capped by the input rate when measured
  doc["accumulation_steps"] = plan.accumulation_steps;
  doc["world_size"] = plan.world_size;
  doc["global_batch"] = plan.global_batch;
  doc["eval_batch"] = eval_batch;
  doc["lr"] = plan.lr;
  doc["lr_factor"] = plan.lr_factor;
  doc["lr_scaling"] = plan.lr_scaling;
  doc["speedup"] = plan.speedup;
  doc["epochs"] = plan.epochs > 0 ? json(plan.epochs) : json(nullptr);
  doc["reference_batch"] = plan.reference_batch;
  doc["notes"] = plan.notes;
  doc["input_images_per_second"] = input_images_per_second > 0 ? json(input_images_per_second) : json(nullptr);
  if (sequence_length > 0) {
    doc["sequence_length"] = sequence_length;
    doc["token_budget"] = token_budget;
  }
  doc["config_patch"] = config_patch_json(settings());
  doc["from_cache"] = from_cache;
  doc["total_seconds"] = total_seconds;
  return doc;
}

std::string FindBatchResult::to_table() const {
  std::ostringstream os;
  const auto& s = search;
  os << fmt::format("find-batch: {} {} on {}, strategy {}, budget {} (headroom {})\n", s.value("model", "?"),
                    s.value("precision", "?"), s.value("device", "?"), s.value("strategy", "?"),
                    mib(s.value("budget_bytes", 0.0)), mib(s.value("headroom_bytes", 0.0)));
  os << fmt::format("  {:>5}  {:>6}  {:>12}  {:<11}  {:>7}  {:>8}\n", "probe", "batch", "peak", "result", "seconds",
                    "img/s");
  int i = 0;
  for (const auto& p : s.at("probes"))
    os << fmt::format("  {:>5}  {:>6}  {:>12}  {:<11}  {:>7.2f}  {:>8.1f}\n", ++i, p.at("batch").get<int>(),
                      p.at("peak_bytes").get<double>() > 0 ? mib(p.at("peak_bytes").get<double>()) : "-",
                      p.at("result").get<std::string>(), p.at("seconds").get<double>(),
                      p.at("images_per_second").get<double>());
  const auto& fit = s.at("fit");
  if (fit.at("points").get<int>() >= 2)
    os << fmt::format("memory model: {} + {} x batch (R^2 {:.4f}, {})\n", mib(fit.at("static_bytes").get<double>()),
                      mib(fit.at("bytes_per_sample").get<double>()), fit.at("r2").get<double>(),
                      count_of(fit.at("points").get<int>(), "probe"));
  const double measured = s.value("measured_peak_bytes", 0.0);
  os << fmt::format("micro-batch {} (found {}; predicted peak {}, measured {}), eval batch {}\n", micro_batch,
                    s.value("found_batch", 0), mib(s.value("predicted_peak_bytes", 0.0)),
                    measured > 0 ? mib(measured) : std::string("- (not probed at this batch)"), eval_batch);
  if (sequence_length > 0)
    os << fmt::format(
        "token budget {} = micro-batch {} x text.max_length {} (loader.token_budget: always safe; shorter "
        "rows then fit more per micro-batch)\n",
        token_budget, micro_batch, sequence_length);
  if (throughput_batch > 0)
    os << fmt::format(
        "throughput: batch {} (doubling it added less than the required images/s, or it is the largest)\n",
        throughput_batch);
  os << fmt::format("global batch {} = {} x {} accumulation x {}; lr {:.4g} ({} x{:.3g} from reference batch {})\n",
                    plan.global_batch, plan.micro_batch, plan.accumulation_steps, count_of(plan.world_size, "rank"),
                    plan.lr, plan.lr_scaling, plan.lr_factor, plan.reference_batch);
  for (const auto& w : s.value("warnings", std::vector<std::string>{})) os << "warning: " << w << "\n";
  for (const auto& n : plan.notes) os << "note: " << n << "\n";
  os << "config patch: " << config_patch_json(settings()).dump() << "\n";
  os << fmt::format("{}, {:.1f} s{}\n", count_of(static_cast<std::int64_t>(s.at("probes").size()), "probe"),
                    total_seconds,
                    from_cache ? fmt::format(" (cached answer, fingerprint {})", s.value("fingerprint", "")) : "");
  return os.str();
}

std::string find_batch_fingerprint(const Config& c, int num_classes, const std::string& device_name,
                                   std::int64_t device_total_bytes, std::int64_t budget_bytes) {
  Fingerprint f;
  f.add(kCacheFormat).add(build_commit()).add(torch_version());
  f.add(device_name).add(static_cast<std::uint64_t>(device_total_bytes)).add(static_cast<std::uint64_t>(budget_bytes));
  f.add(name_in(kBatchObjectiveNames, c.find_batch.objective)).add(std::to_string(c.find_batch.min_throughput_gain));
  f.add(c.model.name).add(static_cast<std::uint64_t>(num_classes)).add(c.model.channels_last ? 1 : 0);
  f.add(std::to_string(c.model.dropout));
  f.add(static_cast<std::uint64_t>(c.augment.image_size));
  f.add(c.augment.mixup_alpha > 0 || c.augment.cutmix_alpha > 0 || c.augment.worst_case ? 1 : 0);
  f.add(precision_name(c.train.precision))
      .add(device_choice_name(c.train.device))
      .add(name_in(kOptimizerKindNames, c.optim.name))
      .add(std::to_string(c.optim.momentum));
  f.add(c.optim.clip_grad_norm > 0 ? 1 : 0)
      .add(name_in(kClassBalanceNames, c.train.class_balance))
      .add(std::to_string(c.train.label_smoothing));
  f.add(static_cast<std::uint64_t>(c.train.eval_batch_size));
  f.add(static_cast<std::uint64_t>(c.loader.prefetch_batches)).add(static_cast<std::uint64_t>(c.loader.workers));
  f.add(c.loader.pin_memory ? 1 : 0);
  f.add(static_cast<std::uint64_t>(resolve_threads(c.run.threads)));
  const auto& fb = c.find_batch;
  f.add(name_in(kSearchStrategyNames, fb.strategy))
      .add(std::to_string(fb.headroom))
      .add(static_cast<std::uint64_t>(fb.probe_steps));
  f.add(static_cast<std::uint64_t>(fb.verify_steps)).add(static_cast<std::uint64_t>(fb.first_batch));
  f.add(static_cast<std::uint64_t>(fb.max_batch)).add(static_cast<std::uint64_t>(fb.round_to));
  f.add(static_cast<std::uint64_t>(fb.process_steps)).add(std::to_string(fb.process_headroom));
  // Text models: the probe's input shape and the model's size follow these.
  if (c.text.vocab_size > 0) {
    f.add(static_cast<std::uint64_t>(c.text.vocab_size)).add(static_cast<std::uint64_t>(c.text.max_length));
    f.add(static_cast<std::uint64_t>(c.text.numeric_fields))
        .add(name_in(kTextPoolingNames, c.text.pooling))
        .add(name_in(kAttentionKernelNames, c.text.attention));
    for (double card : c.text.categorical_cardinalities) f.add(static_cast<std::uint64_t>(card));
  }
  return f.hex();
}

fs::path find_batch_cache_dir(const Config& config) {
  if (!config.find_batch.cache_dir.empty()) return config.find_batch.cache_dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return fs::path(xdg) / "shoplens";
  if (const char* home = std::getenv("HOME"); home && *home) return fs::path(home) / ".cache" / "shoplens";
  return fs::temp_directory_path() / "shoplens-cache";
}

std::optional<json> read_cached_search(const Config& config, const std::string& fingerprint) {
  const fs::path file = find_batch_cache_dir(config) / "find-batch" / (fingerprint + ".json");
  std::error_code ec;
  if (!fs::exists(file, ec)) return std::nullopt;
  try {
    json doc = json::parse(read_file(file));
    if (doc.value("fingerprint", "") != fingerprint || !doc.contains("found_batch") || !doc.contains("probes"))
      throw Error("fields missing");
    return doc;
  } catch (const std::exception& e) {
    // A torn or foreign file is a cache miss, never an answer.
    spdlog::warn("find-batch: ignoring unreadable cache entry {}: {}", file.string(), e.what());
    return std::nullopt;
  }
}

void write_cached_search(const Config& config, const std::string& fingerprint, const json& search) {
  const fs::path dir = find_batch_cache_dir(config) / "find-batch";
  try {
    fs::create_directories(dir);
    write_file_atomic(dir / (fingerprint + ".json"), search.dump(2) + "\n");
  } catch (const std::exception& e) {
    spdlog::warn("find-batch: could not cache the result in {}: {}", dir.string(), e.what());
  }
}

void cap_batch_search_at_samples(Config& config, std::size_t train_samples, int world_size, const std::string& who) {
  const std::size_t ranks = static_cast<std::size_t>(std::max(1, world_size));
  const std::size_t per_rank = std::max<std::size_t>(1, train_samples / ranks);
  if (per_rank >= static_cast<std::size_t>(config.find_batch.max_batch)) return;
  spdlog::info(
      "{}: the batch search stops at {}: the training split's {} over {} "
      "(find_batch.max_batch {})",
      who, per_rank, count_of(train_samples, "sample"), count_of(ranks, "rank"), config.find_batch.max_batch);
  config.find_batch.max_batch = static_cast<int>(per_rank);
}

}  // namespace shoplens
