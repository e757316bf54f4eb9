#include "shoplens/bench/batch_study.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/path_overlap.h"
#include "shoplens/core/plural.h"
#include "shoplens/core/stats.h"
#include "shoplens/core/strings.h"
#include "shoplens/core/subprocess.h"
#include "study_json.h"

namespace shoplens {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

json read_json(const fs::path& p) {
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) throw DataError("batch study: " + p.string() + " is missing");
  try {
    return json::parse(read_file(p));
  } catch (const json::parse_error& e) {
    throw DataError("batch study: " + p.string() + ": " + e.what());
  }
}

void read_metric_records(StudyRun& run, const fs::path& path) {
  std::ifstream metrics(path);
  if (!metrics) throw DataError("batch study: " + path.string() + " is missing");
  for (std::string line; std::getline(metrics, line);) {
    if (trim(line).empty()) continue;
    json r;
    try {
      r = json::parse(line);
    } catch (const json::parse_error&) {
      continue;  // a torn line: the trainer's own reader drops it as well
    }
    const double epoch = num_or(r, "epoch", NAN);
    const std::string phase = r.value("phase", "");
    if (phase == "train" && r.contains("loss")) run.train_loss.emplace_back(epoch, num_or(r, "loss", NAN));
    if (phase == "val" && r.contains("loss")) run.val_loss.emplace_back(epoch, num_or(r, "loss", NAN));
    if (phase == "val" && r.contains("macro_f1")) {
      run.val_f1.emplace_back(epoch, num_or(r, "macro_f1", NAN));
      run.val_seconds.push_back(num_or(r, "train_seconds", NAN));
    }
  }
}

}  // namespace

int count_loss_spikes(const std::vector<std::pair<double, double>>& loss) {
  int spikes = 0;
  for (std::size_t i = 5; i < loss.size(); ++i) {
    std::vector<double> prev;
    for (std::size_t k = i - 5; k < i; ++k) prev.push_back(loss[k].second);
    if (std::isfinite(loss[i].second) && loss[i].second > 1.5 * percentile(prev, 0.5)) ++spikes;
  }
  return spikes;
}

StudyRun read_study_run(const fs::path& run_dir, const std::string& label) {
  StudyRun run;
  run.label = label;
  run.summary = read_json(run_dir / "summary.json");
  const json config = read_json(run_dir / "config.json");
  run.lr = config.at("optim").at("lr").get<double>();
  run.seed = config.at("run").at("seed").get<std::int64_t>();
  run.micro_batch =
      static_cast<int>(num_or(run.summary, "micro_batch_effective", num_or(run.summary, "micro_batch", 0)));
  read_metric_records(run, run_dir / "metrics.jsonl");
  run.loss_spikes = count_loss_spikes(run.train_loss);
  run.final_val_f1 = run.val_f1.empty() ? NAN : run.val_f1.back().second;
  return run;
}

double seconds_to_reach(const StudyRun& run, double target) {
  for (std::size_t i = 0; i < run.val_f1.size() && i < run.val_seconds.size(); ++i)
    if (run.val_f1[i].second >= target - 1e-12) return run.val_seconds[i];
  return NAN;
}

StudySummary summarize_study(const std::vector<StudyRun>& baseline, const std::vector<StudyRun>& candidate) {
  if (baseline.empty() || baseline.size() != candidate.size())
    throw Error("batch study: the baseline and find-batch runs do not pair up by seed");
  StudySummary s;
  s.seeds = static_cast<int>(baseline.size());
  std::vector<double> base_f1, cand_f1, diff, base_ips, cand_ips;
  for (std::size_t i = 0; i < baseline.size(); ++i) {
    const StudyRun &b = baseline[i], &c = candidate[i];
    base_f1.push_back(b.final_val_f1);
    cand_f1.push_back(c.final_val_f1);
    diff.push_back((c.final_val_f1 - b.final_val_f1) * 100);
    const double b_ips = num_or(b.summary, "images_per_second", 0), c_ips = num_or(c.summary, "images_per_second", 0);
    if (b_ips > 0) base_ips.push_back(b_ips);
    if (c_ips > 0) cand_ips.push_back(c_ips);
    s.per_seed_throughput_ratios.push_back(b_ips > 0 && c_ips > 0 ? c_ips / b_ips : NAN);
    const double target = b.final_val_f1 - 0.01;  // the goal's point
    s.baseline_seconds_to_f1.push_back(seconds_to_reach(b, target));
    s.candidate_seconds_to_f1.push_back(seconds_to_reach(c, target));
  }
  s.baseline_f1_mean = mean_of(base_f1);
  s.baseline_f1_sd = sample_sd(base_f1);
  s.candidate_f1_mean = mean_of(cand_f1);
  s.candidate_f1_sd = sample_sd(cand_f1);
  s.f1_difference_mean_points = mean_of(diff);
  s.f1_difference_sd_points = sample_sd(diff);
  s.baseline_images_per_second = base_ips.empty() ? NAN : mean_of(base_ips);
  s.candidate_images_per_second = cand_ips.empty() ? NAN : mean_of(cand_ips);
  s.throughput_ratio = s.candidate_images_per_second / s.baseline_images_per_second;
  s.goal_met = std::isfinite(s.f1_difference_mean_points) && s.f1_difference_mean_points >= -1.0;
  return s;
}

namespace {

// One `shoplens train` run of the study, as its own process (peak memory is per process).
fs::path train_run(const BatchStudyOptions& o, const std::string& binary, const std::string& name, std::int64_t seed,
                   const std::vector<std::string>& batch_args) {
  fs::path dir = o.out / fmt::format("seed-{}", seed) / name;
  if (fs::exists(dir)) fs::remove_all(dir);  // a fresh run: an old one's checkpoints would be refused
  fs::create_directories(dir.parent_path());
  std::vector<std::string> argv{binary, "train"};
  if (!o.train_config.empty()) argv.insert(argv.end(), {"--config", o.train_config});
  argv.insert(argv.end(), {"--shards", o.shards, "--out", dir.string(), "--epochs", std::to_string(o.epochs),
                           "--threads", std::to_string(o.threads), "--memory-budget", o.memory_budget, "--seed",
                           std::to_string(seed), "--set", "train.tensorboard=false", "--set", "train.patience=0"});
  argv.insert(argv.end(), batch_args.begin(), batch_args.end());
  for (const auto& s : o.sets) argv.insert(argv.end(), {"--set", s});
  const fs::path log = dir.string() + ".log";
  spdlog::info("batch study: seed {}: {} run, log {}", seed, name, log.string());
  const ProcessExit exit = run_process(argv, log);
  if (exit.interrupted()) throw InterruptedError();
  if (!exit.ok())
    throw Error(fmt::format("batch study: the {} run (seed {}) failed ({}); see {}", name, seed, exit.describe(),
                            log.string()));
  return dir;
}

json run_json(const StudyRun& r) {
  return {{"seed", r.seed},       {"micro_batch", r.micro_batch}, {"lr", r.lr},
          {"summary", r.summary}, {"loss_spikes", r.loss_spikes}, {"final_val_macro_f1", r.final_val_f1}};
}

// Non-finite entries (a run that never reached the F1) become null: JSON has no NaN.
json finite_or_null(const std::vector<double>& values) {
  json a = json::array();
  for (double x : values) a.push_back(std::isfinite(x) ? json(x) : json(nullptr));
  return a;
}

// One arm of the study: its settings (the same for every seed) and its F1 and time to F1.
json arm_json(const StudyRun& first, double images_per_second, double f1_mean, double f1_sd,
              const std::vector<double>& seconds_to_f1) {
  return {{"micro_batch", first.micro_batch},
          {"lr", first.lr},
          {"images_per_second_mean", finite_or_null({images_per_second})[0]},
          {"val_macro_f1_mean", f1_mean},
          {"val_macro_f1_sd", f1_sd},
          {"seconds_to_f1", finite_or_null(seconds_to_f1)}};
}

json study_json(const std::vector<StudyRun>& base, const std::vector<StudyRun>& cand, const StudySummary& s,
                const fs::path& report) {
  json runs = json::array();
  for (std::size_t i = 0; i < base.size(); ++i)
    runs.push_back({{"seed", base[i].seed}, {"baseline", run_json(base[i])}, {"find_batch", run_json(cand[i])}});
  return {{"seeds", s.seeds},
          {"baseline", arm_json(base[0], s.baseline_images_per_second, s.baseline_f1_mean, s.baseline_f1_sd,
                                s.baseline_seconds_to_f1)},
          {"find_batch", arm_json(cand[0], s.candidate_images_per_second, s.candidate_f1_mean, s.candidate_f1_sd,
                                  s.candidate_seconds_to_f1)},
          {"macro_f1_difference_points", {{"mean", s.f1_difference_mean_points}, {"sd", s.f1_difference_sd_points}}},
          {"goal_met", s.goal_met},
          {"throughput_ratio",
           {{"of_arm_means", finite_or_null({s.throughput_ratio})[0]},
            {"per_seed", finite_or_null(s.per_seed_throughput_ratios)}}},
          {"runs", runs},
          {"report", report.string()}};
}

}  // namespace

std::string study_verdict(const StudySummary& s) {
  const std::string ratio =
      std::isfinite(s.throughput_ratio)
          ? fmt::format("{:.2f}x the baseline's ({:.1f} vs {:.1f} images/s, mean over {})", s.throughput_ratio,
                        s.candidate_images_per_second, s.baseline_images_per_second, count_of(s.seeds, "seed"))
          : std::string("not measured");
  const std::string difference = std::isfinite(s.f1_difference_mean_points)
                                     ? fmt::format("{:+.2f} points", s.f1_difference_mean_points)
                                     : std::string("not measured");
  return fmt::format("goal {}: macro-F1 {} against the baseline (goal: within 1 point); throughput {}",
                     s.goal_met ? "met" : "NOT met", difference, ratio);
}

BatchStudyResult run_batch_study(const BatchStudyOptions& o, const std::string& binary) {
  if (o.shards.empty()) throw UsageError("bench --study batch: --shards is required");
  if (!fs::is_directory(o.shards)) throw UsageError("bench --study batch: --shards '" + o.shards + "' is not a folder");
  if (o.seeds < 1) throw UsageError("bench --study batch: --seeds must be at least 1");
  require_output_apart({"--out", o.out}, {{"--shards", o.shards}, {"--config", o.train_config}});
  fs::create_directories(o.out);
  std::vector<StudyRun> base, cand;
  json find_batch;
  for (int i = 0; i < o.seeds; ++i) {
    const std::int64_t seed = o.first_seed + i;
    // The baseline's lr is the config's; find-batch scales it from the baseline batch (reference_batch).
    const fs::path b = train_run(o, binary, "baseline", seed, {"-b", std::to_string(o.baseline_batch)});
    const fs::path c =
        train_run(o, binary, "find_batch", seed,
                  {"-b", "auto", "--set", fmt::format("find_batch.reference_batch={}", o.baseline_batch)});
    base.push_back(read_study_run(b, "baseline"));
    cand.push_back(read_study_run(c, "find_batch"));
    if (i == 0) find_batch = read_json(c / "find_batch.json");
  }
  const StudySummary summary = summarize_study(base, cand);
  BatchStudyResult result{o.out / "report.html", o.out / "study.json", summary};
  write_file_atomic(result.report, batch_study_html(base, cand, find_batch, o));
  write_file_atomic(result.study_json, study_json(base, cand, summary, result.report).dump(2) + "\n");
  return result;
}

}  // namespace shoplens
