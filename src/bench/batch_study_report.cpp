// The batch-size study's report.html: tables, charts and trade-offs from the runs of every seed.
#include <algorithm>
#include <cmath>
#include <sstream>

#include <fmt/format.h>

#include "shoplens/bench/batch_study.h"
#include "shoplens/core/plural.h"
#include "shoplens/core/strings.h"
#include "shoplens/core/stats.h"
#include "shoplens/core/svg_chart.h"
#include "study_json.h"

namespace shoplens {
namespace {

using json = nlohmann::json;

double images_per_second(const StudyRun& r) { return num_or(r.summary, "images_per_second", 0); }
std::string format_or_na(double v, const char* spec) {
  return std::isfinite(v) ? fmt::format(fmt::runtime(spec), v) : std::string("n/a");
}
std::string run_label(const char* what, const StudyRun& r) { return fmt::format("{} b{}", what, r.micro_batch); }

// images/s and tensor memory against batch (log2): find-batch's probes and fitted line, the runs.
void write_batch_charts(std::ostringstream& os, const std::vector<StudyRun>& base, const std::vector<StudyRun>& cand,
                        const json& search) {
  ChartSeries probe_ips{"find-batch probes", "#888", {}, false}, probe_mem{"find-batch probes", "#888", {}, false};
  double max_probe_batch = 0;
  for (const auto& p : search.value("probes", json::array())) {
    if (!p.value("ok", false)) continue;
    const double b = num_or(p, "batch", NAN);
    max_probe_batch = std::max(max_probe_batch, b);
    if (num_or(p, "images_per_second", 0) > 0) probe_ips.points.emplace_back(b, num_or(p, "images_per_second", 0));
    probe_mem.points.emplace_back(b, num_or(p, "peak_bytes", 0) / 1048576.0);
  }
  ChartSeries fitted{"fitted line", "#2a7", {}, true, true};
  const json fit = search.value("fit", json::object());
  if (fit.contains("bytes_per_sample") && max_probe_batch > 0) {
    const double s0 = num_or(fit, "static_bytes", 0), per = num_or(fit, "bytes_per_sample", 0);
    const double top = std::max<double>(max_probe_batch, cand.front().micro_batch);
    for (double b : {1.0, top / 4, top / 2, top}) fitted.points.emplace_back(b, (s0 + per * b) / 1048576.0);
  }
  ChartSeries base_ips{run_label("baseline", base.front()), "#36c", {}, false};
  ChartSeries cand_ips{run_label("find-batch", cand.front()), "#c33", {}, false};
  for (const auto& r : base) base_ips.points.emplace_back(r.micro_batch, images_per_second(r));
  for (const auto& r : cand) cand_ips.points.emplace_back(r.micro_batch, images_per_second(r));
  os << svg_chart("training images/s against batch", {"micro-batch", true}, {"images/s", false, true},
                  {probe_ips, base_ips, cand_ips});
  os << svg_chart("tensor memory against batch (find-batch)", {"micro-batch", true}, {"peak tensor MiB", false, true},
                  {probe_mem, fitted});
}

// Seed i of n in an arm's colour: the first seed in the full colour, later ones lighter, so every
// seed of every arm is its own series and the arms stay apart.
std::string seed_shade(const int (&rgb)[3], std::size_t i, std::size_t n) {
  const double towards_white = n > 1 ? 0.6 * static_cast<double>(i) / static_cast<double>(n - 1) : 0.0;
  auto mix = [&](int c) { return static_cast<int>(std::lround(c + (255 - c) * towards_white)); };
  return fmt::format("#{:02x}{:02x}{:02x}", mix(rgb[0]), mix(rgb[1]), mix(rgb[2]));
}

using EpochPoints = std::vector<std::pair<double, double>> StudyRun::*;

// One series per seed of one arm, from the runs' per-epoch `points`: a validation record per
// epoch, which every run has however few train records its log interval left.
void add_arm(std::vector<ChartSeries>& out, const char* arm, const int (&rgb)[3], const std::vector<StudyRun>& runs,
             EpochPoints points) {
  for (std::size_t i = 0; i < runs.size(); ++i)
    out.push_back({fmt::format("{} seed {}", run_label(arm, runs[i]), runs[i].seed), seed_shade(rgb, i, runs.size()),
                   runs[i].*points});
}

void write_curve_charts(std::ostringstream& os, const std::vector<StudyRun>& base, const std::vector<StudyRun>& cand) {
  static const int kBaselineRgb[3] = {0x33, 0x66, 0xcc}, kCandidateRgb[3] = {0xcc, 0x33, 0x33};
  std::vector<ChartSeries> loss, f1;
  add_arm(loss, "baseline", kBaselineRgb, base, &StudyRun::val_loss);
  add_arm(loss, "find-batch", kCandidateRgb, cand, &StudyRun::val_loss);
  add_arm(f1, "baseline", kBaselineRgb, base, &StudyRun::val_f1);
  add_arm(f1, "find-batch", kCandidateRgb, cand, &StudyRun::val_f1);
  const ChartAxis epochs{"epoch", false, false, true};
  os << svg_chart("validation loss per epoch", epochs, {"loss", false, true}, loss);
  os << svg_chart("validation macro-F1 per epoch", epochs, {"macro-F1", false, true}, f1);
}

// One arm's column of the table; `images_per_second` is the summary's (the ratio's) figure.
std::vector<std::string> arm_column(const std::vector<StudyRun>& runs, double images_per_second,
                                    const std::vector<double>& seconds_to_f1) {
  std::vector<double> f1, secs;
  std::string per_seed;
  int spikes = 0, skipped = 0, oom = 0;
  double rss = 0;
  for (const auto& r : runs) {
    f1.push_back(r.final_val_f1);
    secs.push_back(num_or(r.summary, "train_seconds", NAN));
    per_seed += (per_seed.empty() ? "" : ", ") + format_or_na(r.final_val_f1, "{:.3f}");
    spikes += r.loss_spikes;
    skipped += r.summary.value("skipped_steps", 0);
    oom += r.summary.value("oom_retries", 0);
    rss = std::max(rss, num_or(r.summary, "peak_rss_bytes", 0));
  }
  int missing = 0;
  const double to_f1 = mean_of_finite(seconds_to_f1, &missing);
  const StudyRun& r = runs.front();
  std::vector<std::string> cells{
      fmt::format("{} x {}", r.micro_batch, r.summary.value("accumulation_steps", 1)),
      format_or_na(r.lr, "{:.4g}"),
      std::to_string(r.summary.value("steps", 0)),
      format_or_na(images_per_second, "{:.1f}"),
      format_or_na(mean_of_finite(secs), "{:.1f} s"),
      format_or_na(to_f1, "{:.1f} s") + (missing > 0 ? fmt::format(" (not reached in {})", missing) : ""),
      fmt::format("{:.0f} MiB", rss / 1048576.0),
      std::to_string(spikes),
      std::to_string(skipped),
      std::to_string(oom),
      per_seed};
  for (auto& c : cells) c = xml_escape(c);
  return cells;
}

void write_comparison_table(std::ostringstream& os, const std::vector<StudyRun>& base,
                            const std::vector<StudyRun>& cand, const StudySummary& s) {
  static const char* kRows[] = {"micro-batch x accumulation",
                                "learning rate",
                                "optimizer steps",
                                "images/s (training, mean)",
                                "train time (mean)",
                                "train time to the baseline's F1 - 1 point (mean)",
                                "peak resident memory (process, max)",
                                "loss spikes (> 1.5x recent median, all seeds)",
                                "skipped steps (non-finite)",
                                "OOM retries",
                                "validation macro-F1 per seed (last)"};
  const auto b = arm_column(base, s.baseline_images_per_second, s.baseline_seconds_to_f1);
  const auto c = arm_column(cand, s.candidate_images_per_second, s.candidate_seconds_to_f1);
  os << "<table>\n<tr><th></th><th>" << xml_escape(run_label("baseline", base.front())) << "</th><th>"
     << xml_escape(run_label("find-batch", cand.front())) << "</th></tr>\n";
  for (std::size_t i = 0; i < std::size(kRows); ++i)
    os << "<tr><td>" << kRows[i] << "</td><td>" << b[i] << "</td><td>" << c[i] << "</td></tr>\n";
  os << fmt::format(
      "<tr><td>validation macro-F1 (mean &#177; sd)</td><td>{:.4f} &#177; {:.4f}</td><td>{:.4f} &#177; {:.4f}"
      "</td></tr>\n</table>\n",
      s.baseline_f1_mean, s.baseline_f1_sd, s.candidate_f1_mean, s.candidate_f1_sd);
}

// The throughput sentence of the summary: the arms' ratio, then each seed's as it was.
std::string throughput_sentence(const StudySummary& s) {
  std::string per_seed;
  for (double r : s.per_seed_throughput_ratios) per_seed += (per_seed.empty() ? "" : ", ") + format_or_na(r, "{:.2f}");
  return fmt::format("Throughput: {}x the baseline's (mean training images/s {} vs {}, as in the table; per seed: {}).",
                     format_or_na(s.throughput_ratio, "{:.2f}"), format_or_na(s.candidate_images_per_second, "{:.1f}"),
                     format_or_na(s.baseline_images_per_second, "{:.1f}"), per_seed);
}

std::string throughput_words(double speedup) {
  if (std::isfinite(speedup) && speedup >= 1.05)
    return fmt::format(
        "The larger micro-batch trained {:.2f}x faster: per-step overhead was amortised over more images.", speedup);
  if (std::isfinite(speedup) && speedup <= 0.95)
    return fmt::format(
        "The larger micro-batch was slower ({:.2f}x): this device was already saturated at the baseline "
        "batch (on CPUs large activations also fall out of cache), so the largest batch that fits is a "
        "limit, not a recommendation.",
        speedup);
  return "Throughput was about the same: the device was saturated at the baseline batch already.";
}

std::string epochs_of(const StudyRun& r) {
  const json& e = r.summary.contains("epochs") ? r.summary["epochs"] : json();
  return e.is_number() ? fmt::format("{:.3g}", e.get<double>()) : std::string("?");
}

void write_tradeoffs(std::ostringstream& os, const std::vector<StudyRun>& base, const std::vector<StudyRun>& cand,
                     const StudySummary& s) {
  os << "<h2>Trade-offs</h2>\n<ul>\n<li><b>Hardware efficiency.</b> " << throughput_words(s.throughput_ratio)
     << " The tensor-memory chart shows what the extra batch costs: the fitted line's slope is the memory per "
        "image.</li>\n";
  os << "<li><b>Convergence.</b> "
     << fmt::format("The find-batch run took {} optimizer steps against {}; ", cand.front().summary.value("steps", 0),
                    base.front().summary.value("steps", 0))
     << "fewer, larger steps carry less gradient noise and need the scaled learning rate (with warm-up) to cover the "
        "same distance. "
     << fmt::format(
            "It trained {} epochs against the baseline's {} (find_batch.train_budget time turns the measured "
            "speed-up into epochs at about the baseline's wall time; epochs keeps them equal). ",
            epochs_of(cand.front()), epochs_of(base.front()))
     << (s.goal_met ? "Here mean macro-F1 stayed within a point of the baseline's (or improved)."
                    : "Here the larger batch lost more than a point of mean macro-F1: give it more epochs "
                      "(find_batch.train_budget time), a longer warm-up, or keep the recipe's global batch "
                      "(find_batch.target_global_batch) with gradient accumulation.")
     << "</li>\n";
  int spikes[2] = {0, 0};
  for (const auto& r : base) spikes[0] += r.loss_spikes;
  for (const auto& r : cand) spikes[1] += r.loss_spikes;
  os << fmt::format(
      "<li><b>Stability.</b> Loss spikes {} vs {} over all seeds (baseline vs find-batch). find-batch "
      "keeps headroom for the worst augmentation, so OOM retries should stay at 0.</li>\n</ul>\n",
      spikes[0], spikes[1]);
}

}  // namespace

std::string batch_study_html(const std::vector<StudyRun>& base, const std::vector<StudyRun>& cand,
                             const json& find_batch, const BatchStudyOptions& o) {
  const StudySummary s = summarize_study(base, cand);
  const json& search = find_batch.contains("search") ? find_batch["search"] : find_batch;
  std::ostringstream os;
  os << "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n<meta "
        "charset=\"utf-8\"/>\n"
     << "<title>shoplens batch-size study</title>\n<style>body{font-family:sans-serif;max-width:1280px;padding:0 "
        "16px;box-sizing:border-box;margin:2em "
        "auto;}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}"
        "th:first-child,td:first-child{text-align:left}.charts svg{margin:6px;border:1px solid "
        "#eee;max-width:calc(100% - 14px);height:auto}</style>\n</head>\n<body>\n";
  os << "<h1>Batch-size study</h1>\n";
  os << fmt::format(
      "<p>Shards <code>{}</code>, {} for the baseline, {}, memory budget {}; model {}, precision {}, {}. Each seed "
      "trains both with <code>shoplens train</code> on the same data; the find-batch "
      "run's learning rate is scaled from the baseline's for its batch ({}).</p>\n",
      xml_escape(o.shards), count_of(o.epochs, "epoch"), count_of(s.seeds, "seed"), xml_escape(o.memory_budget),
      xml_escape(base.front().summary.value("model", "?")), xml_escape(base.front().summary.value("precision", "?")),
      count_of(base.front().summary.value("threads", 0), "thread"), xml_escape(find_batch.value("lr_scaling", "?")));
  write_comparison_table(os, base, cand, s);
  os << fmt::format(
      "<p><b>Macro-F1 difference: {} &#177; {} points</b> (mean &#177; sd over {}; goal: within 1 "
      "point of the baseline: {}). {}</p>\n",
      format_or_na(s.f1_difference_mean_points, "{:+.2f}"), format_or_na(s.f1_difference_sd_points, "{:.2f}"),
      count_of(s.seeds, "seed"), s.goal_met ? "met" : "not met",
      throughput_sentence(s));  // numbers only: nothing to escape
  os << "<div class=\"charts\">\n";
  write_batch_charts(os, base, cand, search);
  write_curve_charts(os, base, cand);
  os << "</div>\n";
  write_tradeoffs(os, base, cand, s);
  os << "<p>Small runs on a shared machine are noisy: read differences of a few percent in images/s, and a "
        "difference of F1 inside its spread over seeds, as ties.</p>\n</body>\n</html>\n";
  return os.str();
}

}  // namespace shoplens
