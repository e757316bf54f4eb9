#include "shoplens/bench/batch_study.h"

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "shoplens/bench/bench_results.h"
#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/stats.h"
#include "shoplens/core/strings.h"

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

double num_or(const json& j, const char* key, double fallback) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : fallback;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

struct Series {
  std::string name, color;
  std::vector<std::pair<double, double>> points;
  bool line = true;  // false: markers only
};

// A small line/scatter chart as inline SVG with axes, ticks and a legend.
std::string svg_chart(const std::string& title, const std::string& xlabel, const std::string& ylabel,
                      const std::vector<Series>& series) {
  const double W = 460, H = 280, L = 64, R = 16, T = 28, B = 44;
  double x0 = 1e300, x1 = -1e300, y0 = 0, y1 = -1e300;
  for (const auto& s : series)
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      x0 = std::min(x0, x);
      x1 = std::max(x1, x);
      y0 = std::min(y0, y);
      y1 = std::max(y1, y);
    }
  if (x0 > x1) x0 = 0, x1 = 1;
  if (x1 - x0 < 1e-12) x1 = x0 + 1;
  if (y1 - y0 < 1e-12) y1 = y0 + 1;
  y1 *= 1.08;
  auto px = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
  auto py = [&](double y) { return H - B - (y - y0) / (y1 - y0) * (H - T - B); };
  std::ostringstream os;
  os << fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
                    "role=\"img\" aria-label=\"{2}\">\n",
                    W, H, xml_escape(title));
  os << fmt::format("<text x=\"{}\" y=\"18\" font-size=\"14\" text-anchor=\"middle\">{}</text>\n", W / 2, xml_escape(title));
  os << fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#333\"/>\n", L, H - B, W - R);
  os << fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#333\"/>\n", L, T, H - B);
  for (int i = 0; i <= 4; ++i) {
    const double xv = x0 + (x1 - x0) * i / 4, yv = y0 + (y1 - y0) * i / 4;
    os << fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-size=\"10\" text-anchor=\"middle\">{:.4g}</text>\n", px(xv),
                      H - B + 14, xv);
    os << fmt::format("<text x=\"{}\" y=\"{:.1f}\" font-size=\"10\" text-anchor=\"end\">{:.4g}</text>\n", L - 4,
                      py(yv) + 3, yv);
    os << fmt::format("<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/>\n", L, py(yv), W - R);
  }
  os << fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">{}</text>\n", (L + W - R) / 2, H - 8,
                    xml_escape(xlabel));
  os << fmt::format("<text x=\"12\" y=\"{0}\" font-size=\"11\" text-anchor=\"middle\" transform=\"rotate(-90 12 {0})\">{1}</text>\n",
                    (T + H - B) / 2, xml_escape(ylabel));
  int legend = 0;
  for (const auto& s : series) {
    std::vector<std::pair<double, double>> pts;
    for (const auto& p : s.points)
      if (std::isfinite(p.first) && std::isfinite(p.second)) pts.push_back(p);
    if (s.line && pts.size() > 1) {
      os << "<polyline fill=\"none\" stroke=\"" << s.color << "\" stroke-width=\"1.8\" points=\"";
      for (const auto& [x, y] : pts) os << fmt::format("{:.1f},{:.1f} ", px(x), py(y));
      os << "\"/>\n";
    }
    for (const auto& [x, y] : pts)
      os << fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\"/>\n", px(x), py(y), s.line ? 1.8 : 3.5,
                        s.color);
    os << fmt::format("<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/>", L + 8, T + 4 + legend * 14, s.color);
    os << fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"10\">{}</text>\n", L + 22, T + 13 + legend * 14, xml_escape(s.name));
    ++legend;
  }
  os << "</svg>\n";
  return os.str();
}

std::string mib(double bytes) { return fmt::format("{:.0f} MiB", bytes / (1024.0 * 1024.0)); }

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
  run.micro_batch = static_cast<int>(num_or(run.summary, "micro_batch_effective", num_or(run.summary, "micro_batch", 0)));
  std::ifstream metrics(run_dir / "metrics.jsonl");
  if (!metrics) throw DataError("batch study: " + (run_dir / "metrics.jsonl").string() + " is missing");
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
    if (phase == "val" && r.contains("macro_f1")) run.val_f1.emplace_back(epoch, num_or(r, "macro_f1", NAN));
  }
  run.loss_spikes = count_loss_spikes(run.train_loss);
  run.final_val_f1 = run.val_f1.empty() ? NAN : run.val_f1.back().second;
  return run;
}

namespace {

double images_per_second(const StudyRun& r) { return num_or(r.summary, "images_per_second", 0); }
double peak_rss(const StudyRun& r) { return num_or(r.summary, "peak_rss_bytes", 0); }
std::string format_or_na(double v, const char* spec) {
  return std::isfinite(v) ? fmt::format(fmt::runtime(spec), v) : std::string("n/a");
}
std::string run_label(const char* what, const StudyRun& r) { return fmt::format("{} b{}", what, r.micro_batch); }

// Throughput and memory against batch (the probes, the fitted line, the two runs), and the two runs' curves.
void write_charts(std::ostringstream& os, const StudyRun& base, const StudyRun& cand, const json& search) {
  const json probes = search.value("probes", json::array());
  const json fit = search.value("fit", json::object());
  Series probe_ips{"find-batch probes", "#888", {}, false}, probe_mem{"find-batch probes (peak)", "#888", {}, false};
  double max_probe_batch = 0;
  for (const auto& p : probes) {
    const double b = num_or(p, "batch", NAN);
    if (!p.value("ok", false)) continue;
    max_probe_batch = std::max(max_probe_batch, b);
    if (num_or(p, "images_per_second", 0) > 0) probe_ips.points.emplace_back(b, num_or(p, "images_per_second", 0));
    probe_mem.points.emplace_back(b, num_or(p, "peak_bytes", 0) / (1024.0 * 1024.0));
  }
  Series fitted{"fitted memory line", "#2a7", {}, true};
  if (fit.contains("bytes_per_sample") && max_probe_batch > 0) {
    const double s0 = num_or(fit, "static_bytes", 0), per = num_or(fit, "bytes_per_sample", 0);
    const double top = std::max<double>(max_probe_batch, cand.micro_batch);
    for (double b : {1.0, top / 2, top}) fitted.points.emplace_back(b, (s0 + per * b) / (1024.0 * 1024.0));
  }
  Series runs_ips{"training runs", "#c33",
                  {{base.micro_batch, images_per_second(base)}, {cand.micro_batch, images_per_second(cand)}}, false};
  Series runs_mem{"training runs (peak RSS)", "#c33",
                  {{base.micro_batch, peak_rss(base) / 1048576.0}, {cand.micro_batch, peak_rss(cand) / 1048576.0}}, false};
  const std::string bl = run_label("baseline", base), cl = run_label("find-batch", cand);
  os << "<div class=\"charts\">\n";
  os << svg_chart("images/s against batch", "micro-batch", "images/s", {probe_ips, runs_ips});
  os << svg_chart("memory against batch", "micro-batch", "MiB", {probe_mem, fitted, runs_mem});
  os << svg_chart("training loss", "epoch", "loss", {{bl, "#36c", base.train_loss, true}, {cl, "#c33", cand.train_loss, true}});
  os << svg_chart("validation macro-F1", "epoch", "macro-F1", {{bl, "#36c", base.val_f1, true}, {cl, "#c33", cand.val_f1, true}});
  os << "</div>\n";
}

void write_comparison_table(std::ostringstream& os, const StudyRun& base, const StudyRun& cand) {
  os << "<table>\n<tr><th></th><th>" << xml_escape(run_label("baseline", base)) << "</th><th>"
     << xml_escape(run_label("find-batch", cand)) << "</th></tr>\n";
  auto row = [&](const std::string& name, const std::string& a, const std::string& b) {
    os << "<tr><td>" << xml_escape(name) << "</td><td>" << xml_escape(a) << "</td><td>" << xml_escape(b) << "</td></tr>\n";
  };
  auto count = [](const StudyRun& r, const char* key, int fallback) { return std::to_string(r.summary.value(key, fallback)); };
  const auto& f = format_or_na;
  row("micro-batch x accumulation", fmt::format("{} x {}", base.micro_batch, base.summary.value("accumulation_steps", 1)),
      fmt::format("{} x {}", cand.micro_batch, cand.summary.value("accumulation_steps", 1)));
  row("learning rate", f(base.lr, "{:.4g}"), f(cand.lr, "{:.4g}"));
  row("optimizer steps", count(base, "steps", 0), count(cand, "steps", 0));
  row("images/s (training)", f(images_per_second(base), "{:.1f}"), f(images_per_second(cand), "{:.1f}"));
  row("train time", f(num_or(base.summary, "train_seconds", NAN), "{:.1f} s"),
      f(num_or(cand.summary, "train_seconds", NAN), "{:.1f} s"));
  row("peak memory (resident)", mib(peak_rss(base)), mib(peak_rss(cand)));
  row("loss spikes (> 1.5x recent median)", std::to_string(base.loss_spikes), std::to_string(cand.loss_spikes));
  row("skipped steps (non-finite)", count(base, "skipped_steps", 0), count(cand, "skipped_steps", 0));
  row("OOM retries", count(base, "oom_retries", 0), count(cand, "oom_retries", 0));
  row("validation macro-F1 (last)", f(base.final_val_f1, "{:.4f}"), f(cand.final_val_f1, "{:.4f}"));
  os << "</table>\n";
}

void write_tradeoffs(std::ostringstream& os, const StudyRun& base, const StudyRun& cand, double speedup,
                     double f1_diff_points) {
  os << "<h2>Trade-offs</h2>\n<ul>\n";
  os << "<li><b>Hardware efficiency.</b> "
     << (std::isfinite(speedup) && speedup >= 1.05
             ? fmt::format("The larger micro-batch trained {:.2f}x faster: per-step overhead was amortised over more images.", speedup)
             : std::isfinite(speedup) && speedup <= 0.95
                   ? fmt::format("The larger micro-batch was slower ({:.2f}x): this device was already saturated at the "
                                 "baseline batch (on CPUs large activations also fall out of cache), so the largest batch "
                                 "that fits is a limit, not a recommendation.", speedup)
                   : "Throughput was about the same: the device was saturated at the baseline batch already.")
     << " The memory chart shows what the extra batch costs: the fitted line's slope is the memory per image.</li>\n";
  os << "<li><b>Convergence.</b> "
     << fmt::format("The find-batch run took {} optimizer steps against {}; ", cand.summary.value("steps", 0),
                    base.summary.value("steps", 0))
     << "fewer, larger steps carry less gradient noise and need the scaled learning rate (with warm-up) to cover the "
        "same distance. "
     << (std::isfinite(f1_diff_points) && f1_diff_points < -1
             ? "Here the larger batch lost more than a point of macro-F1 in the same epochs: give it more epochs, a "
               "longer warm-up, or use gradient accumulation at a smaller micro-batch."
             : "Here macro-F1 stayed within a point (or improved), so the larger batch did not cost accuracy in these epochs.")
     << "</li>\n";
  os << fmt::format("<li><b>Stability.</b> Loss spikes {} vs {}, skipped steps {} vs {}, OOM retries {} vs {} (baseline vs "
                    "find-batch). find-batch keeps headroom for the worst augmentation, so OOM retries should stay at 0.</li>\n",
                    base.loss_spikes, cand.loss_spikes, base.summary.value("skipped_steps", 0),
                    cand.summary.value("skipped_steps", 0), base.summary.value("oom_retries", 0),
                    cand.summary.value("oom_retries", 0));
  os << "</ul>\n";
}

}  // namespace

std::string batch_study_html(const StudyRun& base, const StudyRun& cand, const json& find_batch,
                             const BatchStudyOptions& o) {
  const json& search = find_batch.contains("search") ? find_batch["search"] : find_batch;
  const double f1_diff_points = (cand.final_val_f1 - base.final_val_f1) * 100;
  const double speedup = images_per_second(base) > 0 ? images_per_second(cand) / images_per_second(base) : NAN;
  std::ostringstream os;
  os << "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
     << "<title>shoplens batch-size study</title>\n<style>body{font-family:sans-serif;max-width:980px;margin:2em auto;}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}"
        "th:first-child,td:first-child{text-align:left}.charts svg{margin:6px;border:1px solid #eee}</style>\n</head>\n<body>\n";
  os << "<h1>Batch-size study</h1>\n";
  os << fmt::format("<p>Shards <code>{}</code>, {} epochs each, memory budget {}; model {}, precision {}, {} threads. "
                    "Both runs are <code>shoplens train</code> on the same data and seed; the find-batch run's learning "
                    "rate is scaled from the baseline's for its batch ({}).</p>\n",
                    xml_escape(o.shards), o.epochs, xml_escape(o.memory_budget),
                    xml_escape(base.summary.value("model", "?")), xml_escape(base.summary.value("precision", "?")),
                    base.summary.value("threads", 0), xml_escape(find_batch.value("plan", json::object()).value("lr_scaling", "linear")));
  write_comparison_table(os, base, cand);
  os << fmt::format("<p><b>Macro-F1 difference: {} points</b> (goal: within 1 point of the baseline: {}). "
                    "Throughput: {}x the baseline's.</p>\n",
                    format_or_na(f1_diff_points, "{:+.2f}"),
                    std::isfinite(f1_diff_points) ? (std::fabs(f1_diff_points) <= 1 || f1_diff_points > 0 ? "met" : "not met") : "n/a",
                    format_or_na(speedup, "{:.2f}"));
  write_charts(os, base, cand, search);
  write_tradeoffs(os, base, cand, speedup, f1_diff_points);
  os << "<p>Small runs on a shared machine are noisy: read differences of a few percent in images/s, and of "
        "a point of F1 on a small validation set, as ties.</p>\n</body>\n</html>\n";
  return os.str();
}

fs::path run_batch_study(const BatchStudyOptions& o, const std::string& binary) {
  if (o.shards.empty()) throw UsageError("bench --study batch: --shards is required");
  if (!fs::is_directory(o.shards)) throw UsageError("bench --study batch: --shards '" + o.shards + "' is not a folder");
  fs::create_directories(o.out);
  auto train = [&](const std::string& name, const std::string& batch_args) {
    const fs::path dir = o.out / name;
    if (fs::exists(dir)) fs::remove_all(dir);  // a fresh run: an old one's checkpoints would be refused
    std::string cmd = shell_quote(binary) + " train";
    if (!o.train_config.empty()) cmd += " --config " + shell_quote(o.train_config);
    cmd += " --shards " + shell_quote(o.shards) + " --out " + shell_quote(dir.string()) +
           fmt::format(" --epochs {} --threads {} --memory-budget {} ", o.epochs, o.threads, shell_quote(o.memory_budget)) +
           batch_args + " --set train.tensorboard=false --set train.patience=0";
    for (const auto& s : o.sets) cmd += " --set " + shell_quote(s);
    const fs::path log = o.out / (name + ".log");
    spdlog::info("batch study: {}", cmd);
    const int status = std::system((cmd + " > " + shell_quote(log.string()) + " 2>&1").c_str());
    if (WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 130)) throw InterruptedError();
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      throw Error(fmt::format("batch study: the {} run failed (exit {}); see {}", name,
                              WIFEXITED(status) ? WEXITSTATUS(status) : -1, log.string()));
    return dir;
  };
  // The baseline's lr is the config's; find-batch scales it from the baseline batch (reference_batch).
  const fs::path base_dir = train("baseline", fmt::format("-b {}", o.baseline_batch));
  const fs::path cand_dir = train("find_batch", fmt::format("-b auto --set find_batch.reference_batch={}", o.baseline_batch));
  const StudyRun base = read_study_run(base_dir, "baseline");
  const StudyRun cand = read_study_run(cand_dir, "find_batch");
  const json fb = read_json(cand_dir / "find_batch.json");
  const fs::path report = o.out / "report.html";
  write_file_atomic(report, batch_study_html(base, cand, fb, o));
  json study = {{"baseline", {{"micro_batch", base.micro_batch}, {"lr", base.lr}, {"summary", base.summary},
                              {"loss_spikes", base.loss_spikes}, {"final_val_macro_f1", base.final_val_f1}}},
                {"find_batch", {{"micro_batch", cand.micro_batch}, {"lr", cand.lr}, {"summary", cand.summary},
                                {"loss_spikes", cand.loss_spikes}, {"final_val_macro_f1", cand.final_val_f1}}},
                {"macro_f1_difference_points", (cand.final_val_f1 - base.final_val_f1) * 100},
                {"report", report.string()}};
  write_file_atomic(o.out / "study.json", study.dump(2) + "\n");
  return report;
}

}  // namespace shoplens
