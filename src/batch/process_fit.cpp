#include "shoplens/batch/process_fit.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/strings.h"
#include "shoplens/core/subprocess.h"

namespace shoplens {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

constexpr int kMaxProcessProbes = 4;

bool fits(const ProcessProbe& p, std::int64_t usable) { return p.ran && p.process_peak_bytes <= usable; }

int round_down_to(int batch, int round_to) {
  return round_to > 1 && batch >= round_to ? batch - batch % round_to : std::max(1, batch);
}

// A batch below `over` whose process should fit: the process scaled down with the batch as a
// whole, aimed a tenth short (its memory beside the tensors grows with the batch too, and not
// smoothly: oneDNN picks other kernels and scratch sizes at other shapes).
int step_below(const ProcessProbe& over, std::int64_t usable) {
  if (over.process_peak_bytes <= 0) return std::max(1, over.batch / 2);  // an OOM probe: no process figure
  const double scaled = over.batch * static_cast<double>(usable) / static_cast<double>(over.process_peak_bytes);
  return std::clamp(static_cast<int>(std::floor(0.9 * scaled)), 1, over.batch - 1);
}

std::string last_bytes(const std::string& text, std::size_t n) {
  return text.size() <= n ? text : text.substr(text.size() - n);
}

ProcessProbe probe_logged(const ProcessProbeFn& probe, int batch, std::int64_t usable) {
  const ProcessProbe p = probe(batch);
  spdlog::info("find-batch: a fresh process at batch {}: {}, tensors {}, process {} ({} usable), {:.1f} s", batch,
               p.ran ? "ran" : "out of memory", format_bytes(static_cast<double>(p.tensors_peak_bytes)),
               format_bytes(static_cast<double>(p.process_peak_bytes)), format_bytes(static_cast<double>(usable)),
               p.seconds);
  return p;
}

}  // namespace

ProcessFit fit_process(int start, std::int64_t usable, int round_to, const ProcessProbeFn& probe) {
  ProcessFit fit;
  fit.batch = start;
  fit.probes.push_back(probe_logged(probe, start, usable));
  if (fit.probes.back().ran && fit.probes.back().process_peak_bytes <= 0) {
    fit.measured = false;
    fit.note = "this machine cannot measure a process's peak (/proc/self/clear_refs): the budget covers the tensors";
    return fit;
  }
  if (fits(fit.probes.back(), usable)) return fit;
  ProcessProbe over = fit.probes.back();
  int best = 0;
  while (static_cast<int>(fit.probes.size()) < kMaxProcessProbes && over.batch > 1) {
    int next = round_down_to(step_below(over, usable), round_to);
    if (best > 0) {  // between a fitting and a failing probe: the line through the two
      const ProcessProbe& lo =
          *std::find_if(fit.probes.begin(), fit.probes.end(), [&](const ProcessProbe& p) { return p.batch == best; });
      const double slope = static_cast<double>(over.process_peak_bytes - lo.process_peak_bytes) / (over.batch - best);
      next =
          slope > 0 ? round_down_to(best + static_cast<int>((usable - lo.process_peak_bytes) / slope), round_to) : best;
      if (next <= best || next >= over.batch) break;
    }
    fit.probes.push_back(probe_logged(probe, next, usable));
    if (fits(fit.probes.back(), usable))
      best = std::max(best, next);
    else
      over = fit.probes.back();
  }
  if (best == 0)
    throw Error(fmt::format(
        "find-batch: the job's process does not fit the budget: at batch {} it held {} ({} of it tensors), {} "
        "usable. The memory beside the tensors (oneDNN's primitives, the allocator's free blocks) does not shrink "
        "with the batch: raise train.memory_budget, or set find_batch.process_check=false to budget the tensors only",
        over.batch, format_bytes(static_cast<double>(over.process_peak_bytes)),
        format_bytes(static_cast<double>(over.tensors_peak_bytes)), format_bytes(static_cast<double>(usable))));
  fit.batch = best;
  const ProcessProbe& first = fit.probes.front();
  fit.note = fmt::format(
      "batch {}'s tensors fit, but its process held {} ({} beside the tensors), over the {} usable: batch {} fits "
      "the whole process (find_batch.process_check=false budgets the tensors only)",
      first.batch, format_bytes(static_cast<double>(first.process_peak_bytes)),
      format_bytes(static_cast<double>(first.process_peak_bytes - first.tensors_peak_bytes)),
      format_bytes(static_cast<double>(usable)), best);
  return fit;
}

json process_probe_to_json(const ProcessProbe& p) {
  return {{"batch", p.batch},
          {"ran", p.ran},
          {"tensors_peak_bytes", p.tensors_peak_bytes},
          {"process_peak_bytes", p.process_peak_bytes},
          {"seconds", p.seconds}};
}

ProcessProbe process_probe_from_json(const json& doc) {
  ProcessProbe p;
  p.batch = doc.at("batch").get<int>();
  p.ran = doc.at("ran").get<bool>();
  p.tensors_peak_bytes = doc.at("tensors_peak_bytes").get<std::int64_t>();
  p.process_peak_bytes = doc.at("process_peak_bytes").get<std::int64_t>();
  p.seconds = doc.value("seconds", 0.0);
  return p;
}

json process_fit_to_json(const ProcessFit& fit, std::int64_t usable) {
  json probes = json::array();
  for (const auto& p : fit.probes) {
    json j = process_probe_to_json(p);
    j["fits"] = fits(p, usable);
    probes.push_back(j);
  }
  return {{"batch", fit.batch}, {"measured", fit.measured}, {"usable_bytes", usable}, {"probes", probes}};
}

const fs::path& ProbeFolder::path() {
  if (!path_.empty()) return path_;
  std::string pattern = (fs::temp_directory_path() / "shoplens-probe-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr)
    throw IoError("cannot create a folder for the fresh-process probes under " + fs::temp_directory_path().string() +
                  ": " + std::strerror(errno));
  path_ = pattern;
  return path_;
}

ProbeFolder::~ProbeFolder() {
  std::error_code ec;
  if (!path_.empty()) fs::remove_all(path_, ec);
}

ProcessProbeFn spawn_process_probe(const fs::path& exe, const Config& config, int num_classes, ProbeFolder& folder) {
  Config probe_config = config;
  probe_config.data.shards.clear();  // the probe's inputs are synthetic: no dataset to open
  probe_config.find_batch.cache = false;
  return [exe, probe_config, num_classes, &folder](int batch) {
    const fs::path config_file = folder.path() / "probe_config.json";
    if (!fs::exists(config_file)) write_file_atomic(config_file, config_to_json(probe_config).dump(2) + "\n");
    const fs::path out = folder.path() / fmt::format("process-{}.json", batch);
    const fs::path log = folder.path() / fmt::format("process-{}.log", batch);
    const ProcessExit exit =
        run_process({exe.string(), "find-batch", "--config", config_file.string(), "--classes",
                     std::to_string(num_classes), "--probe-process-at", std::to_string(batch), "-o", out.string()},
                    log);
    if (exit.interrupted()) throw InterruptedError();
    if (!exit.ok())
      throw Error(fmt::format("find-batch: the fresh-process probe at batch {} failed ({}); its log:\n{}", batch,
                              exit.describe(), last_bytes(read_file(log), 4096)));
    return process_probe_from_json(json::parse(read_file(out)));
  };
}

}  // namespace shoplens
