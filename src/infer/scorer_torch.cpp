#include "shoplens/infer/scorer.h"

#include <torch/torch.h>

#include <signal.h>

#include <cerrno>
#include <cstdlib>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "batch_inference.h"
#include "score_chunks.h"
#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/path_overlap.h"
#include "shoplens/core/plural.h"
#include "shoplens/core/json_limits.h"
#include "shoplens/core/hash.h"
#include "shoplens/core/price_table.h"
#include "shoplens/core/runtime.h"
#include "shoplens/core/stats.h"
#include "shoplens/core/utf8.h"
#include "shoplens/dist/cuda_device.h"
#include "shoplens/infer/evaluation.h"
#include "shoplens/infer/inference_session.h"
#include "shoplens/infer/model_export.h"

namespace shoplens {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// A writer killed mid-write (SIGKILL, SIGXFSZ) leaves its hidden temporary (".NAME.tmp-PID-N",
// see atomic_file.cpp) behind; it never looks like a chunk, but it holds disk space that a rerun
// after a full disk needs. Only temporaries of processes that are gone are removed.
void remove_stale_temporaries(const fs::path& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const auto tmp = name.rfind(".tmp-");
    if (name.empty() || name[0] != '.' || tmp == std::string::npos) continue;
    const long pid = std::strtol(name.c_str() + tmp + 5, nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      fs::remove(entry.path(), ec);
      spdlog::info("score: removed {} left by an earlier run that did not finish", entry.path().string());
    }
  }
}

// The price is resolved before any work, so a bad table or instance name costs nothing.
std::optional<PriceOffer> resolve_offer(const ScoreOptions& o, PriceBasis basis) {
  if (o.prices.empty() && o.instance.empty()) return std::nullopt;
  if (o.prices.empty() || o.instance.empty()) throw UsageError("score: --prices FILE and --instance NAME go together");
  if (o.price_per_hour > 0) throw UsageError("score: give --price-per-hour or --prices/--instance, not both");
  PriceOffer offer = load_price_table(o.prices).find(o.instance);
  offer.per_hour(basis);  // UsageError now if the row has no spot price
  return offer;
}

json read_job_file(const fs::path& job_file) {
  try {
    const std::string text = read_file(job_file);
    if (!json_nesting_exceeds(text)) return json::parse(text);  // too deep: another job, not printed
  } catch (const std::exception&) {}
  return json();
}

// A shard's job that differs from the recorded one only in its rows: the input changed under it.
// Its chunks would no longer line up with the other shards' ranges, so it is refused, not rescored.
void refuse_changed_shard(const ScoreOptions& o, const json& existing, const json& job) {
  if (!existing.is_object() || !existing.contains("shard") || !job.contains("shard")) return;
  auto without_rows = [](json j) {
    j.erase("rows");
    j["shard"].erase("rows_fingerprint");
    j["shard"].erase("first_row");
    j["shard"].erase("end_row");
    return j;
  };
  if (without_rows(existing) != without_rows(job)) return;
  const json &was = existing["shard"], &now = job["shard"];
  throw DataError(fmt::format(
      "score: the input changed since {} was started in {}: it had {} rows, the shard rows {}..{} with "
      "fingerprint {}; now {} rows, rows {}..{} with fingerprint {}. Every shard must score the same input: "
      "restore it, or score the new input into a new --out (all shards)",
      now.value("name", "the shard"), o.out_dir.string(), existing.value("rows", json()).dump(),
      was.value("first_row", json()).dump(), was.value("end_row", json()).dump(),
      was.value("rows_fingerprint", std::string()), job.value("rows", json()).dump(),
      now.value("first_row", json()).dump(), now.value("end_row", json()).dump(),
      now.value("rows_fingerprint", std::string())));
}

// The out folder belongs to one job: same model weights, input, chunking and precision (and for a
// shard, the same shard of the same rows).
void claim_out_dir(const ScoreOptions& o, const json& job) {
  fs::create_directories(o.out_dir / "chunks");
  const fs::path job_file = o.out_dir / "score_job.json";
  std::error_code ec;
  if (fs::exists(job_file, ec)) {
    const json existing = read_job_file(job_file);
    if (existing != job) {
      refuse_changed_shard(o, existing, job);
      throw UsageError("score: " + o.out_dir.string() + " holds another job (" + existing.dump() +
                       "); use another --out, or remove it to start over");
    }
  } else {
    write_file_atomic(job_file, job.dump(2) + "\n");
  }
  remove_stale_temporaries(o.out_dir);
  remove_stale_temporaries(o.out_dir / "chunks");
}

// Reduced precision is checked against fp32 on the first real rows before the job runs in it.
json measure_drift(const ScoreOptions& o, BatchInference& scorer, ScoreRows& rows, RowRange range, int batch) {
  BatchTimings scratch;
  const std::size_t sample = std::min<std::size_t>(range.size(), static_cast<std::size_t>(o.drift_sample));
  InferenceOptions fp32 = scorer.session().options();
  fp32.precision = Precision::kFp32;
  InferenceSession reference_session(load_exported_model(o.model_dir, o.variant, false), fp32);
  BatchInference reference(reference_session, rows, scorer.workers());
  std::int64_t compared = 0, agree = 0;
  double max_diff = 0;
  for_each_window(rows, range.begin, range.begin + sample, [&](std::size_t begin, std::size_t end) {
    const auto reduced = scorer.run_range(begin, end, batch, scratch);
    const auto exact = reference.run_range(begin, end, batch, scratch);
    for (std::size_t i = 0; i < reduced.size() && i < exact.size(); ++i) {
      if (!reduced[i].ok || !exact[i].ok) continue;
      ++compared;
      agree += reduced[i].label == exact[i].label;
      for (std::size_t c = 0; c < reduced[i].probs.size(); ++c)
        max_diff = std::max(max_diff, static_cast<double>(std::abs(reduced[i].probs[c] - exact[i].probs[c])));
    }
  });
  const double agreement = compared ? static_cast<double>(agree) / compared : 1.0;
  spdlog::info("score: {} vs fp32 on {}: top-1 agreement {:.4f}, largest probability difference {:.2e}",
               precision_name(o.precision), count_of(compared, "row"), agreement, max_diff);
  return {{"rows_compared", compared}, {"top1_agreement", agreement}, {"max_prob_diff", max_diff}};
}

// The job's throughput (this run's scoring and what reused chunks recorded), and the latency and
// queue figures of this run's batches (none when every chunk was reused).
void add_timing(json& report, const BatchTimings& timing, const JobThroughput& job, double compute_only) {
  const auto measured_or_null = [](double value) { return value > 0 ? json(value) : json(nullptr); };
  report["images_scored_this_run"] = timing.images;
  report["images_per_second"] = measured_or_null(job.images_per_second());
  report["throughput"] = job.to_json();
  report["compute_images_per_second"] =
      measured_or_null(timing.compute_seconds > 0 ? timing.images / timing.compute_seconds : 0.0);
  report["compute_only_images_per_second"] = compute_only;
  report["overlap_efficiency"] = measured_or_null(compute_only > 0 ? job.images_per_second() / compute_only : 0.0);
  const bool batches = timing.batch_ms.count() > 0;
  const auto latency = [&](double q) { return batches ? json(timing.batch_ms.percentile(q)) : json(nullptr); };
  report["batch_latency_ms"] = {
      {"p50", latency(0.5)}, {"p95", latency(0.95)}, {"p99", latency(0.99)}, {"batches", timing.batch_ms.count()}};
  json sizes = json::object();
  for (const auto& [size, count] : timing.batch_sizes) sizes[std::to_string(size)] = count;
  report["batch_sizes"] = sizes;
  const int longest_queue = timing.queue_lengths.empty() ? 0 : timing.queue_lengths.rbegin()->first;
  report["queue_length"] = {{"median", percentile_of_counts(timing.queue_lengths, 0.5)}, {"max", longest_queue}};
}

// The closing line: rows, where they went, and the throughput with where it comes from.
std::string score_summary_line(const ScoreOptions& o, std::size_t rows, const JoinedRows& joined,
                               const ChunkCounts& chunks, const BatchTimings& timing, const JobThroughput& job) {
  std::string line = fmt::format("score: {} ({}) -> {}; ", count_of(static_cast<std::int64_t>(rows), "row"),
                                 count_of(static_cast<std::int64_t>(joined.errors), "error"),
                                 (o.out_dir / "predictions.csv").string());
  line += job.measured() ? fmt::format("{:.1f} images/s ({})", job.images_per_second(), job.source())
                         : "throughput not measured (" + job.source() + ")";
  line += timing.batch_ms.count() > 0 ? fmt::format(", batch p95 {:.1f} ms", timing.batch_ms.percentile(0.95))
                                      : ", batch latency not measured (no batch scored in this run)";
  if (chunks.reused)
    line += fmt::format(", {} reused from an earlier run ({} rows unchanged)", count_of(chunks.reused, "chunk"),
                        chunks.reused == 1 ? "its" : "their");
  if (chunks.rescored)
    line += fmt::format(", {} rescored (rows changed or not verifiable)", count_of(chunks.rescored, "chunk"));
  return line;
}

void add_cost(json& report, const ScoreOptions& o, const std::optional<PriceOffer>& offer, PriceBasis basis,
              double images_per_second) {
  if (images_per_second <= 0) {
    if (offer || o.price_per_hour > 0) {
      report["cost_per_million_images"] = nullptr;
      report["cost_not_reported"] = "throughput not measured: no chunk of this job recorded its scoring time";
      spdlog::warn(
          "score: no cost per million images: every chunk was reused and none recorded its scoring time "
          "(scored by an earlier version); score into a new --out to measure");
    }
    return;
  }
  if (o.price_per_hour > 0) {
    report["cost_per_million_images"] = cost_per_million_images(o.price_per_hour, images_per_second);
    report["price_per_device_hour"] = o.price_per_hour;  // what `score-merge` prices the shards with
  }
  if (!offer) return;
  // One job drives one device: an instance with N accelerators runs N such jobs side by side.
  const double per_device = offer->per_hour(basis) / offer->devices();
  report["price_per_device_hour"] = per_device;
  const std::string measured_on = wants_cuda(o.device) ? "gpu" : "cpu";
  report["cost_per_million_images"] = cost_per_million_images(per_device, images_per_second);
  report["cost"] = {{"instance", offer->name},
                    {"basis", to_string(basis)},
                    {"price_per_hour", offer->per_hour(basis)},
                    {"devices_per_instance", offer->devices()},
                    {"price_per_device_hour", per_device},
                    {"measured_on", measured_on},
                    {"offer_kind", offer->kind},
                    {"source", offer->source},
                    {"date", offer->date},
                    {"prices", o.prices.string()}};
  if (measured_on != offer->kind)
    spdlog::warn("score: throughput measured on {} but priced as {} ({}): the cost assumes this rate there",
                 measured_on, offer->name, offer->kind);
  spdlog::info("score: {:.4f} per million images on {} ({}, {:.4f}/h per device; prices of {} from {})",
               report["cost_per_million_images"].get<double>(), offer->name, to_string(basis), per_device, offer->date,
               offer->source);
}

// The shard's place in the job: its rows and their fingerprint, for score_job.json (what a resume
// must match) and report.json (what `score merge` checks).
json shard_json(const ScoreShard& shard, RowRange range, std::uint64_t fingerprint) {
  return {{"index", shard.index},
          {"count", shard.count},
          {"name", shard.name()},
          {"folder", shard.folder()},
          {"first_row", range.begin},
          {"end_row", range.end},
          {"rows_fingerprint", fmt::format("{:016x}", fingerprint)}};
}

void bind_shard_device(const ScoreOptions& o, const ScoreShard& shard) {
  if (!shard.local_rank || !wants_cuda(o.device)) return;
  DistEnv env;
  env.local_rank = *shard.local_rank;
  env.world_size = static_cast<int>(shard.count);
  env.source = shard.source;
  bind_cuda_device(env);
}

json base_report(const ScoreOptions& o, const ScoreRows& rows, RowRange range, const json& job) {
  json report = {{"rows", range.size()},
                 {"input_rows", rows.size()},
                 {"chunks", (range.size() + o.chunk_rows - 1) / o.chunk_rows},
                 {"model", o.model_dir.string()},
                 {"input", rows.describe()},
                 {"precision", precision_name(o.precision)},
                 {"variant", o.variant},
                 {"device", wants_cuda(o.device) ? "cuda" : "cpu"},
                 {"threads", at::get_num_threads()},
                 {"workers", o.workers > 0 ? o.workers : usable_cores()},
                 {"commit", build_commit()},
                 {"torch", torch_version()},
                 {"job", job}};
  return report;
}

InferenceOptions inference_options(const ScoreOptions& o) {
  InferenceOptions inference;
  inference.precision = o.precision;
  inference.device = o.device;
  inference.exact_decode = !o.fast_decode;
  return inference;
}

std::unique_ptr<ScoreRows> open_job_rows(const ScoreOptions& o, const DecodeOptions& decode) {
  RowsOptions rows_options;
  rows_options.split = o.split;
  rows_options.decode = decode;
  rows_options.root = o.root;
  return open_score_rows(o.input, rows_options);
}

// What identifies the job in its out folder; a shard adds its rows and their fingerprint.
json job_identity(const ScoreOptions& o, const InferenceSession& session, ScoreRows& rows, const ScoreShard& shard,
                  RowRange range) {
  json job = {{"model_weights_crc32", session.model().card.at("fingerprint").at("weights_crc32")},
              {"variant", o.variant},
              {"precision", precision_name(o.precision)},
              {"input", rows.describe()},
              {"rows", rows.size()},
              {"chunk_rows", o.chunk_rows},
              {"exact_decode", session.options().exact_decode}};
  if (shard.sharded()) job["shard"] = shard_json(shard, range, shard_fingerprint(rows, range));
  return job;
}

void add_results(json& report, const JoinedRows& joined, const ChunkCounts& chunks, RowRange range) {
  report["rows_ok"] = range.size() - joined.errors;
  report["rows_error"] = joined.errors;
  report["error_reasons"] = joined.error_reasons;
  report["chunks_reused"] = chunks.reused;
  report["chunks_rescored"] = chunks.rescored;
  report["chunks_written"] = chunks.written;
}

// One process's job: the whole input, or its shard's rows into its shard's folder.
json run_shard_job(const ScoreOptions& o, const ScoreShard& shard) {
  const auto job_start = SteadyClock::now();
  const PriceBasis basis = parse_price_basis(o.price_basis);
  const std::optional<PriceOffer> offer = resolve_offer(o, basis);
  bind_shard_device(o, shard);
  InferenceSession session(load_exported_model(o.model_dir, o.variant, /*verify=*/true), inference_options(o));
  const auto rows = open_job_rows(o, session.decode_options());
  const RowRange range = shard_rows(rows->size(), shard.index, shard.count, static_cast<std::size_t>(o.chunk_rows));
  const json job = job_identity(o, session, *rows, shard, range);
  claim_out_dir(o, job);

  BatchInference scorer(session, *rows, o.workers);
  json report = base_report(o, *rows, range, job);
  if (shard.sharded()) {
    report["shard"] = job["shard"];
    report["shard"]["source"] = shard.source;
  }
  int batch = o.batch_size;
  if (o.max_latency_ms > 0) {
    report["latency_curve"] = scorer.choose_batch(o.max_latency_ms, o.max_batch, batch);
    spdlog::info("score: batch {} is the largest whose measured p95 fits {} ms", batch, o.max_latency_ms);
  }
  report["batch_size"] = batch;
  // What the device does alone: end-to-end throughput is judged against it (overlap_efficiency).
  const double compute_only = batch / (percentile(scorer.time_compute(batch, 7), 0.5) / 1e3);
  if (o.precision != Precision::kFp32 && o.drift_sample > 0)
    report["drift"] = measure_drift(o, scorer, *rows, range, batch);

  BatchTimings timing;
  const ChunkCounts chunks = score_chunks(o, scorer, *rows, range, batch, timing);
  std::optional<EvaluationAccumulator> metrics;
  if (rows->has_labels()) metrics.emplace(session.class_names());
  const JoinedRows joined = join_chunks(o, session.class_names(), *rows, range, metrics ? &*metrics : nullptr);
  add_results(report, joined, chunks, range);
  if (metrics) {
    report["metrics"] = metrics->to_json();
    spdlog::info("score: {}", metrics->summary_line());
  }
  const JobThroughput throughput = job_throughput(timing, chunks);
  add_timing(report, timing, throughput, compute_only);
  add_cost(report, o, offer, basis, throughput.images_per_second());
  report["wall_seconds"] = seconds_since(job_start);
  write_file_atomic(o.out_dir / "report.json", dump_json_escaped(report, 2) + "\n");
  spdlog::info("{}", score_summary_line(o, range.size(), joined, chunks, timing, throughput));
  return report;
}

void check_score_options(const ScoreOptions& o) {
  if (o.out_dir.empty()) throw UsageError("score: --out OUT_DIR is required");
  if (o.chunk_rows < 1 || o.batch_size < 1 || o.max_batch < 1)
    throw UsageError("score: --chunk-rows, --batch-size and --max-batch must be >= 1");
  require_output_apart({"--out", o.out_dir},
                       {{"--input", o.input}, {"--weights", o.model_dir}, {"--prices", o.prices}});
}

}  // namespace

json run_score_job(const ScoreOptions& options) {
  check_score_options(options);
  const ScoreShard shard = resolve_score_shard(options.shard, options.environment);
  if (!shard.sharded()) return run_shard_job(options, shard);
  ScoreOptions o = options;
  o.out_dir = options.out_dir / shard.folder();
  spdlog::info("score: {} -> {}", shard.describe(), o.out_dir.string());
  return run_shard_job(o, shard);
}

json plan_score_shard(const ScoreOptions& options) {
  const ScoreShard shard = resolve_score_shard(options.shard, options.environment);
  DecodeOptions decode;
  decode.accurate_dct = !options.fast_decode;
  const auto rows = open_job_rows(options, decode);
  const RowRange range =
      shard_rows(rows->size(), shard.index, shard.count, static_cast<std::size_t>(options.chunk_rows));
  json plan = shard_json(shard, range, shard_fingerprint(*rows, range));
  plan["source"] = shard.source;
  plan["input"] = rows->describe();
  plan["input_rows"] = rows->size();
  plan["rows"] = range.size();
  plan["out"] = (shard.sharded() ? options.out_dir / shard.folder() : options.out_dir).string();
  return plan;
}

}  // namespace shoplens
