#include "shoplens/bench/bench_runner.h"

#include <sys/resource.h>
#include <unistd.h>

#include <torch/torch.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <optional>

#include <spdlog/spdlog.h>

#include "shoplens/batch/find_batch.h"
#include "shoplens/batch/memory_probe.h"
#include "shoplens/bench/synthetic_step.h"
#include "shoplens/core/config.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/interrupt.h"
#include "shoplens/core/runtime.h"
#include "shoplens/data/loader.h"
#include "shoplens/data/shards.h"
#include "shoplens/data/text_batches.h"
#include "shoplens/data/text_task.h"
#include "shoplens/models/classifier.h"
#include "shoplens/train/optimizer.h"
#include "shoplens/train/train_step.h"

namespace shoplens {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double cpu_seconds_now() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto tv = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
  return tv(u.ru_utime) + tv(u.ru_stime);
}

// Resets the kernel's resident high-water mark (VmHWM) so the peak is this scenario's, not the
// process's lifetime one (Linux >= 4.0). False when refused.
bool reset_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  if (!f) return false;
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}

std::int64_t vm_hwm_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // reported in kB
  return static_cast<std::int64_t>(peak_rss_bytes());
}

// NVML numbers the physical GPUs; CUDA's device 0 is the first of CUDA_VISIBLE_DEVICES. A UUID
// there (rather than an index) falls back to 0.
int nvml_index_of_cuda_device0() {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (!visible || !*visible) return 0;
  const std::string first = std::string(visible).substr(0, std::string(visible).find(','));
  if (first.empty() || first.find_first_not_of("0123456789") != std::string::npos) return 0;
  return std::stoi(first);
}

bool is_text_scenario(const BenchScenario& s) { return is_text_model(s.model); }

// Text scenarios on shards take the dataset's shape (vocabulary, metadata), as `train` does.
struct TextData {
  TextDatasetInfo info;
  Config config;  // text.* resolved
};

std::optional<TextData> open_text_data(const BenchScenario& s) {
  if (!is_text_scenario(s) || s.data != BenchData::kShards) return std::nullopt;
  if (!is_text_dataset(s.shards))
    throw ConfigError("bench: " + s.name + ": " + s.model + " is a text model but " + s.shards +
                      " holds no text dataset (text_dataset.json)");
  TextData d;
  d.info = read_text_dataset_info(s.shards);
  d.config.model.name = s.model;
  d.config.text.max_length = s.seq_len;
  d.config.run.seed = static_cast<std::int64_t>(s.seed);
  resolve_text_config(d.config, d.info, s.shards);
  return d;
}

int auto_batch(const BenchScenario& s, int threads, const std::optional<TextData>& text) {
  Config c = text ? text->config : Config{};
  c.model.name = s.model;
  c.model.channels_last = s.channels_last;
  c.augment.image_size = s.image_size;
  c.train.precision = s.precision;
  c.train.device = s.device;
  c.train.memory_budget = s.memory_budget;
  c.optim.name = s.optimizer;
  c.optim.implementation = s.optimizer_impl;
  c.run.threads = threads;
  c.run.seed = static_cast<std::int64_t>(s.seed);
  if (is_text_scenario(s) && !text) {
    c.text.vocab_size = s.vocab_size;
    c.text.max_length = s.seq_len;
  }
  if (s.data == BenchData::kShards) {
    const std::size_t train_samples =
        text ? open_text_split(s.shards, Split::kTrain)->size() : ShardDataset::open(s.shards, Split::kTrain)->size();
    cap_batch_search_at_samples(c, train_samples, 1, "bench: " + s.name);
  }
  const auto found = find_batch(c, s.num_classes, /*use_cache=*/true);
  spdlog::info("bench: {}: batch auto -> {} (find-batch{})", s.name, found.micro_batch,
               found.from_cache ? ", cached" : "");
  return found.micro_batch;
}

// Where the batches come from: one fixed synthetic batch (the device alone) or the loader.
class BatchFeed {
 public:
  BatchFeed(const BenchScenario& s, int batch, int threads, const SyntheticJob& job,
            const std::optional<TextData>& text)
      : device_(job.cuda ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU)) {
    if (s.data == BenchData::kSynthetic) {
      fixed_ = job.batch(batch);  // the model's worst case: text at seq_len, every token real
      return;
    }
    LoaderOptions lo;
    lo.batch_size = batch;
    lo.workers = s.loader_workers > 0 ? s.loader_workers : threads;
    lo.seed = s.seed;
    if (text) {
      // The text loader of `train` (cmd_train's open_text_data): length bucketing, padding to
      // each batch's longest row.
      auto split = open_text_split(s.shards, Split::kTrain);
      auto builder = std::make_shared<TextBatchBuilder>(split, text_batch_options(text->config, text->info));
      loader_.emplace(split, builder, lo);
    } else {
      auto dataset = ShardDataset::open(s.shards, Split::kTrain);
      if (dataset->num_classes() > s.num_classes)
        throw ConfigError("bench: " + s.name + ": the shards have " + std::to_string(dataset->num_classes()) +
                          " classes, num_classes is " + std::to_string(s.num_classes));
      AugmentConfig augment;
      augment.image_size = s.image_size;
      loader_.emplace(dataset, augment, lo);
    }
    if (loader_->batches_per_epoch() < 1)
      throw DataError("bench: " + s.name + ": " + s.shards + " holds fewer training samples than one batch of " +
                      std::to_string(batch));
    loader_->start_epoch(epoch_);
  }

  // The next batch; `wait` gets the time blocked on the loader.
  Batch next(double& wait) {
    if (fixed_) {
      wait = 0;
      return *fixed_;
    }
    const auto t0 = Clock::now();
    auto b = loader_->next();
    if (!b) {
      accumulate_stats();
      loader_->start_epoch(++epoch_);
      b = loader_->next();
    }
    wait = seconds_since(t0);
    return device_.is_cuda() ? b->to(device_, /*non_blocking=*/true) : std::move(*b);
  }

  // Padded token slots that held no token, over every batch delivered (0 for synthetic batches).
  double padding_fraction() {
    if (!loader_) return 0;
    LoaderStats total = done_;
    total.padded_tokens += loader_->stats().padded_tokens;
    total.real_tokens += loader_->stats().real_tokens;
    return total.padding_fraction();
  }

 private:
  void accumulate_stats() {
    done_.padded_tokens += loader_->stats().padded_tokens;
    done_.real_tokens += loader_->stats().real_tokens;
  }

  torch::Device device_;
  std::optional<Batch> fixed_;
  std::optional<Loader> loader_;
  std::int64_t epoch_ = 0;
  LoaderStats done_;  // earlier epochs (a new epoch resets the loader's stats)
};

// One measured trial: s.steps steps from the feed, each timed, with the wait for the feed apart.
void run_trial(const BenchScenario& s, TrainStep& step, BatchFeed& feed, ScenarioResult& r) {
  double wait = 0, waited = 0;
  std::int64_t tokens = 0;
  const double cpu0 = cpu_seconds_now();
  const auto t0 = Clock::now();
  for (int i = 0; i < s.steps; ++i) {
    throw_if_interrupted();
    const Batch b = feed.next(wait);
    waited += wait;
    if (b.is_text()) tokens += b.real_tokens();
    const auto ts = Clock::now();
    step.run({b});  // reads the loss back, so the step has finished (also on CUDA) when this returns
    r.step_seconds.push_back(seconds_since(ts));
  }
  const double window = seconds_since(t0);
  r.trial_cpu_seconds.push_back(cpu_seconds_now() - cpu0);
  r.cpu_seconds += r.trial_cpu_seconds.back();
  r.trial_seconds.push_back(window);
  r.trial_data_wait_seconds.push_back(waited);
  r.trial_images_per_second.push_back(static_cast<double>(r.batch) * s.steps / window);
  if (r.text) r.trial_tokens_per_second.push_back(static_cast<double>(tokens) / window);
}

void measure(const BenchScenario& s, const Nvml& nvml, ScenarioResult& r) {
  const bool cuda = s.device == DeviceChoice::kCuda;
  if (cuda && !cuda_available()) throw ConfigError("device cuda: CUDA is not available (build or machine)");
  r.threads = resolve_threads(s.threads);
  set_compute_threads(r.threads);
  const std::optional<TextData> text = open_text_data(s);
  r.batch = s.batch_auto ? auto_batch(s, r.threads, text) : s.batch;
  r.peak_rss_scoped = reset_peak_rss();
  auto memory = make_memory_probe(cuda);
  memory->reset_peak();

  seed_torch(s.seed);
  SyntheticJobOptions job_options{s, cuda};
  if (text) job_options.text = &text->config.text;
  const SyntheticJob job(job_options);
  r.scenario.optimizer_impl = job.optim->implementation();  // auto resolved
  TrainStep& step = *job.step;
  r.text = job.is_text();
  BatchFeed feed(s, r.batch, r.threads, job, text);

  GpuSampler sampler(nvml, nvml_index_of_cuda_device0());
  std::vector<std::pair<double, double>> windows;  // each trial's measured window on the sampler's clock
  for (int trial = 0; trial < s.trials; ++trial) {
    double wait = 0;
    for (int i = 0; i < s.warmup_steps; ++i) {
      throw_if_interrupted();
      step.run({feed.next(wait)});
    }
    if (trial == 0 && cuda) sampler.start();  // GPU samples cover the measured trials
    const double begin = sampler.elapsed();
    run_trial(s, step, feed, r);
    windows.emplace_back(begin, sampler.elapsed());
  }
  if (r.text) r.padding_fraction = feed.padding_fraction();
  r.gpu_samples = sampler.stop();
  if (!r.gpu_samples.empty())
    for (const auto& [begin, end] : windows) r.trial_gpu.push_back(summarise_trial_gpu(r.gpu_samples, begin, end));
  if (cuda)
    r.gpu_status = nvml.available() ? (r.gpu_samples.empty() ? "no samples" : "ok") : nvml.why();
  else
    r.gpu_status = "not used (cpu scenario)";
  const auto stats = memory->stats();
  r.peak_allocated_bytes = stats.peak_allocated_bytes;
  r.peak_reserved_bytes = stats.peak_reserved_bytes;
  r.peak_rss_bytes = vm_hwm_bytes();
}

}  // namespace

BenchEnvironment bench_environment(const Nvml& nvml) {
  BenchEnvironment env = host_environment();
  env.driver = nvml.available() ? nvml.driver_version() : nvml.why();
  env.device_name = nvml.available() ? nvml.device_name(nvml_index_of_cuda_device0()) : "";
  if (env.device_name.empty() && env.cuda_compiled) env.device_name = "cuda";
  return env;
}

ScenarioResult run_scenario(const BenchScenario& scenario, const Nvml& nvml) {
  ScenarioResult r;
  r.scenario = scenario;
  try {
    measure(scenario, nvml, r);
  } catch (const InterruptedError&) {
    throw;
  } catch (const std::exception& e) {
    // One failed cell must not hide the others' figures: recorded, reported, exit 1 at the end.
    r.error = error_message(e);
    r.trial_images_per_second.clear();
    r.trial_tokens_per_second.clear();
    spdlog::error("bench: {}: {}", scenario.name, r.error);
  }
  return r;
}

}  // namespace shoplens
