// find-batch on this machine's device: budget, the job probe, the search, rounding, verification.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "shoplens/batch/find_batch.h"
#include "shoplens/batch/job_probe.h"
#include "shoplens/batch/memory_probe.h"
#include "shoplens/batch/process_fit.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/plural.h"
#include "shoplens/core/runtime.h"
#include "shoplens/core/strings.h"
#include "shoplens/models/classifier.h"
#include "shoplens/train/amp.h"

namespace shoplens {
namespace {

using json = nlohmann::json;

int world_size_from_env() {
  for (const char* name : {"WORLD_SIZE", "SLURM_NTASKS"})
    if (const char* v = std::getenv(name); v && *v) return std::max(1, std::atoi(v));
  return 1;
}

std::int64_t resolve_budget(const Config& config, const MemoryProbe& memory) {
  if (config.train.memory_budget.is_set()) return config.train.memory_budget.as_int64();
  const std::int64_t free = memory.device_free_bytes();
  if (free <= 0)
    throw ConfigError("find-batch: cannot read the free memory of " + memory.device_name() +
                      "; set train.memory_budget");
  spdlog::info("find-batch: no train.memory_budget given; using the free memory of {}: {}", memory.device_name(),
               format_bytes(static_cast<double>(free)));
  return free;
}

const char* outcome_text(const ProbeResult& p) {
  if (p.outcome == ProbeResult::Outcome::kOutOfMemory) return "out of memory";
  if (p.outcome == ProbeResult::Outcome::kFailed) return "failed";
  return "ran";
}

int round_down(int micro, int round_to) { return round_to > 1 && micro >= round_to ? micro - micro % round_to : micro; }

// A probe at `batch` counts as fitting when it ran and its peak stayed within the usable budget.
ProbeResult judged(ProbeResult p, int batch, std::int64_t usable_bytes) {
  p.batch = batch;
  p.fits = p.outcome == ProbeResult::Outcome::kRan && p.peak_bytes <= usable_bytes;
  return p;
}

// The answer must itself have run verify_steps steps within the usable budget: verify it, stepping
// down a little while it does not. Returns the verified micro-batch.
int verify_micro_batch(JobProbe& job, SearchResult& s, int micro, int round_to, const FindBatchConfig& fb) {
  for (int attempt = 0;; ++attempt) {
    const ProbeResult* known = s.probe_at(micro);
    if (known && known->fits && known->steps >= fb.verify_steps) return micro;
    const ProbeResult v = judged(job.run(micro, fb.verify_steps), micro, s.usable_bytes);
    spdlog::info("find-batch: verifying batch {} over {}: {}, peak {}", micro, count_of(fb.verify_steps, "step"),
                 v.fits ? "fits" : outcome_text(v), format_bytes(static_cast<double>(v.peak_bytes)));
    s.probes.push_back(v);
    if (v.outcome == ProbeResult::Outcome::kFailed)
      throw Error("find-batch: the verification at batch " + std::to_string(micro) + " failed: " + v.error);
    if (v.fits) return micro;
    if (attempt >= 3 || micro <= 1)
      throw Error("find-batch: batch " + std::to_string(micro) +
                  " did not stay within the budget over the verification steps; memory is too noisy to promise a "
                  "batch: raise find_batch.headroom");
    const int step_down = std::max(round_to, std::max(1, micro / 50));
    s.warnings.push_back("batch " + std::to_string(micro) +
                         " exceeded the usable budget during verification; stepped down");
    micro = round_down(std::max(1, micro - step_down), round_to);
  }
}

// Throughput at the recipe's batch and its doublings up to the largest that fits (each probed
// unless a probe already ran there), so the plan can see whether a larger batch is any faster.
void probe_throughput(JobProbe& job, SearchResult& s, int largest, const Config& config) {
  for (int b : throughput_ladder(static_cast<int>(reference_global_batch(config)), largest)) {
    const ProbeResult* known = s.probe_at(b);
    if (known && known->fits && known->images_per_second > 0) continue;
    ProbeResult p = judged(job.run(b, std::max(2, config.find_batch.probe_steps)), b, s.usable_bytes);
    p.for_throughput = true;
    spdlog::info("find-batch: throughput at batch {}: {:.1f} images/s ({})", b, p.images_per_second, outcome_text(p));
    s.probes.push_back(p);
  }
}

// Refuses a budget below the model's static memory (weights, gradients, optimizer state).
void check_budget_covers_the_model(const Config& config, const JobProbe& job, std::int64_t budget) {
  const std::int64_t static_bytes = job.static_bytes_estimate();
  if (static_bytes < budget) return;
  throw ConfigError(fmt::format(
      "train.memory_budget {} is below the static memory of {} with {}: about {} for weights, gradients and "
      "optimizer state before any batch; raise the budget or choose a smaller model or optimizer",
      format_bytes(static_cast<double>(budget)), config.model.name, name_in(kOptimizerKindNames, config.optim.name),
      format_bytes(static_cast<double>(static_bytes))));
}

SearchResult search_with_probes(const Config& config, JobProbe& job, std::int64_t budget, int round_to) {
  const auto& fb = config.find_batch;
  SearchOptions options;
  options.strategy = fb.strategy;
  if (fb.strategy == SearchStrategy::kFit) options.granularity = round_to;  // binsearch and exact keep their own steps
  options.budget_bytes = budget;
  options.headroom_fraction = fb.headroom;
  options.first_batch = fb.first_batch;
  options.max_batch = fb.max_batch;
  if (is_text_model(config.model.name)) options.input_size_key = "text.max_length";
  int probe_number = 0;
  const ProbeFn probe = [&](int batch) {
    ProbeResult r = job.run(batch, fb.probe_steps);
    spdlog::info("find-batch: probe {} at batch {}: {}, peak {}, {:.1f} s", ++probe_number, batch, outcome_text(r),
                 r.peak_bytes > 0 ? format_bytes(static_cast<double>(r.peak_bytes)) : "-", r.seconds);
    return r;
  };
  return search_batch(probe, options);
}

// Where the search ran and with what: the fields that make a cached answer reusable and a result
// reproducible.
void describe_search(json& doc, const Config& config, int num_classes, const MemoryProbe& memory, const JobProbe& job) {
  doc["strategy"] = name_in(kSearchStrategyNames, config.find_batch.strategy);
  doc["device"] = memory.device_name();
  doc["device_total_bytes"] = memory.device_total_bytes();
  doc["model"] = config.model.name;
  doc["num_classes"] = num_classes;
  doc["precision"] = precision_name(config.train.precision);
  doc["image_size"] = config.augment.image_size;
  // Text: every probe ran at max_length with every token real (Classifier::example_batch).
  if (is_text_model(config.model.name)) doc["sequence_length"] = config.text.max_length;
  doc["channels_last"] = config.model.channels_last;
  doc["optimizer"] = name_in(kOptimizerKindNames, config.optim.name);
  doc["static_bytes_estimate"] = job.static_bytes_estimate();
  doc["loader_batches_held"] = job.loader_batches_held();
  doc["program_resident_bytes"] = job.program_resident_bytes();
  doc["probe_steps"] = config.find_batch.probe_steps;
  doc["verify_steps"] = config.find_batch.verify_steps;
  doc["threads"] = resolve_threads(config.run.threads);
  doc["torch"] = torch_version();
  doc["commit"] = build_commit();
  doc["date"] = today_date();
}

// Probes, search, rounding and verification: the search document (cached under `fingerprint`).
json search_micro_batch(const Config& config, int num_classes, MemoryProbe& memory, std::int64_t budget, int round_to,
                        const std::string& fingerprint, std::int64_t free_at_start, const ProcessProbeFn* process) {
  // The model is built before the cap so that a budget below its weights gets a clear message.
  JobProbe job(config, num_classes, memory);
  check_budget_covers_the_model(config, job, budget);
  memory.set_budget(budget);  // the allocator refuses beyond it, as the real card would
  SearchResult s = search_with_probes(config, job, budget, round_to);
  int micro = round_down(s.batch, round_to);
  if (config.find_batch.strategy == SearchStrategy::kFit)
    micro = verify_micro_batch(job, s, micro, round_to, config.find_batch);
  json process_fit;
  if (process) {  // the whole process must fit too, measured in fresh processes
    const auto usable = s.usable_bytes - static_cast<std::int64_t>(config.find_batch.process_headroom * budget);
    const ProcessFit fit = fit_process(micro, usable, round_to, *process);
    process_fit = process_fit_to_json(fit, usable);
    process_fit["tensors_batch"] = micro;
    process_fit["note"] = fit.note;
    micro = fit.batch;
  }
  if (config.find_batch.objective == BatchObjective::kThroughput) probe_throughput(job, s, micro, config);
  if (const ProbeResult* at = s.probe_at(micro); at && at->outcome == ProbeResult::Outcome::kRan)
    s.measured_peak_bytes = at->peak_bytes;
  if (s.fit.points >= 2) s.predicted_peak_bytes = static_cast<std::int64_t>(s.fit.predict(micro));
  json doc = search_to_json(s);
  doc["fingerprint"] = fingerprint;
  doc["micro_batch"] = micro;
  if (config.find_batch.objective == BatchObjective::kThroughput) {
    const auto ladder = throughput_ladder(static_cast<int>(reference_global_batch(config)), micro);
    const auto rates = ladder_rates(s.probes, ladder);
    json rungs = json::array();
    for (std::size_t i = 0; i < ladder.size(); ++i)
      rungs.push_back({{"batch", ladder[i]}, {"images_per_second", rates[i]}});
    doc["throughput_ladder"] = rungs;  // the step's rates; each use caps them by its loader's rate
  }
  if (!process_fit.is_null()) doc["process_fit"] = process_fit;
  doc["round_to"] = round_to;
  doc["device_free_bytes"] = free_at_start;
  describe_search(doc, config, num_classes, memory, job);
  return doc;
}

// objective throughput: the knee of the step's rates along the ladder, each capped by what the
// loader delivers when that was measured, and its speed-up over the ladder's first (reference)
// batch. A cache written before the ladder was recorded: the knee it stored, speed-up unknown (1).
struct ThroughputChoice {
  int batch = 0;
  double speedup = 1;
};

ThroughputChoice choose_throughput_batch(const json& search, const FindBatchConfig& fb, double input_rate,
                                         int round_to) {
  if (!search.contains("throughput_ladder")) return {search.value("throughput_batch", 0), 1.0};
  std::vector<int> ladder;
  std::vector<double> rates;
  for (const auto& rung : search.at("throughput_ladder")) {
    ladder.push_back(rung.at("batch").get<int>());
    rates.push_back(rung.at("images_per_second").get<double>());
  }
  rates = cap_rates(std::move(rates), input_rate);
  ThroughputChoice choice;
  const int knee = throughput_knee(rates, ladder, fb.min_throughput_gain);
  choice.batch = round_down(knee, round_to);
  const auto at = std::find(ladder.begin(), ladder.end(), knee) - ladder.begin();
  if (!rates.empty() && rates.front() > 0 && at < static_cast<std::ptrdiff_t>(rates.size()) && rates[at] > 0)
    choice.speedup = rates[at] / rates.front();
  return choice;
}

}  // namespace

ProcessProbe probe_this_process(const Config& config, int num_classes, int batch) {
  auto memory = make_memory_probe(/*cuda=*/false);
  const std::int64_t budget = resolve_budget(config, *memory);
  JobProbe job(config, num_classes, *memory);
  memory->set_budget(budget);
  const ProbeResult r = job.run(batch, config.find_batch.process_steps);
  if (r.outcome == ProbeResult::Outcome::kFailed)
    throw Error(fmt::format("the probe at batch {} failed, and not for lack of memory: {}", batch, r.error));
  ProcessProbe p;
  p.batch = batch;
  p.ran = r.outcome == ProbeResult::Outcome::kRan;
  p.tensors_peak_bytes = r.peak_bytes;
  p.process_peak_bytes = r.process_peak_bytes;
  p.seconds = r.seconds;
  return p;
}

FindBatchResult find_batch(const Config& config, int num_classes, bool use_cache, double input_images_per_second,
                           const ProcessProbeFn& process_probe) {
  const auto start = std::chrono::steady_clock::now();
  const auto& fb = config.find_batch;
  const Precision precision = config.train.precision;
  const bool cuda = wants_cuda(config.train.device);
  auto memory = make_memory_probe(cuda);
  const std::int64_t free_at_start = memory->device_free_bytes();
  const std::int64_t budget = resolve_budget(config, *memory);
  if (budget > memory->device_total_bytes() && memory->device_total_bytes() > 0)
    spdlog::warn("find-batch: the budget {} exceeds {}'s memory {}", format_bytes(static_cast<double>(budget)),
                 memory->device_name(), format_bytes(static_cast<double>(memory->device_total_bytes())));
  const int round_to = fb.round_to > 0 ? fb.round_to : (cuda && precision != Precision::kFp32 ? 8 : 1);
  // CPU with an explicit budget: the process must fit it too (checked where a prober is given).
  const bool check_process = process_probe && !cuda && config.train.memory_budget.is_set() && fb.process_check;
  const std::string fingerprint =
      find_batch_fingerprint(config, num_classes, memory->device_name(), memory->device_total_bytes(), budget) +
      (check_process ? "-process" : "");

  FindBatchResult result;
  if (use_cache && fb.cache) {
    if (auto cached = read_cached_search(config, fingerprint)) {
      result.search = std::move(*cached);
      result.from_cache = true;
      spdlog::info(
          "find-batch: cached answer for fingerprint {} (find_batch.cache=false or --no-cache to search again)",
          fingerprint);
    }
  }
  if (!result.from_cache) {
    result.search = search_micro_batch(config, num_classes, *memory, budget, round_to, fingerprint, free_at_start,
                                       check_process ? &process_probe : nullptr);
    if (fb.cache) write_cached_search(config, fingerprint, result.search);
  }

  result.micro_batch = result.search.at("micro_batch").get<int>();
  result.eval_batch = config.train.eval_batch_size > 0 ? config.train.eval_batch_size : result.micro_batch;
  result.sequence_length = result.search.value("sequence_length", 0);
  result.token_budget = static_cast<std::int64_t>(result.micro_batch) * result.sequence_length;
  result.input_images_per_second = input_images_per_second;
  const ThroughputChoice choice = choose_throughput_batch(result.search, fb, input_images_per_second, round_to);
  result.throughput_batch = choice.batch;
  const bool by_throughput = fb.objective == BatchObjective::kThroughput && result.throughput_batch > 0;
  result.plan = plan_batch(by_throughput ? result.throughput_batch : result.micro_batch, fb.target_global_batch,
                           world_size_from_env(), config);
  if (const auto fit = result.search.find("process_fit"); fit != result.search.end() && !fit->value("note", "").empty())
    result.plan.notes.push_back(fit->at("note").get<std::string>());
  // The speed-up was measured for one micro-batch per step; an accumulation target changes the step.
  if (by_throughput && fb.target_global_batch <= 0) budget_epochs_by_time(result.plan, choice.speedup, config);
  if (by_throughput && input_images_per_second > 0)
    result.plan.notes.push_back(fmt::format(
        "the input pipeline delivers about {:.0f} images/s beside training (loader.workers {}, this config's "
        "augmentation, find_batch.input_rate_share {:g}): the step's images/s count only up to that rate",
        input_images_per_second, config.loader.workers, config.find_batch.input_rate_share));
  if (by_throughput && result.throughput_batch < result.micro_batch)
    result.plan.notes.push_back(fmt::format(
        "batch {} fits, but doubling beyond {} added less than {:.0f}% images/s: a larger batch would mostly cost "
        "optimizer steps, so the plan uses {} (find_batch.objective=memory plans the largest that fits)",
        result.micro_batch, result.throughput_batch, fb.min_throughput_gain * 100, result.throughput_batch));
  result.total_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace shoplens
