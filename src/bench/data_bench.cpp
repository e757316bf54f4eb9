#include "shoplens/bench/data_bench.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <spdlog/spdlog.h>

#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/interrupt.h"
#include "shoplens/core/runtime.h"
#include "shoplens/data/augment.h"
#include "shoplens/data/csv.h"
#include "shoplens/data/image_io.h"
#include "shoplens/data/loader.h"
#include "shoplens/data/prepare.h"
#include "shoplens/data/shards.h"

namespace shoplens {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

BenchRecord make_record(std::string scenario, std::string impl, int threads, std::uint64_t images, double seconds) {
  BenchRecord r;
  r.scenario = std::move(scenario);
  r.implementation = std::move(impl);
  r.threads = threads;
  r.images = images;
  r.seconds = seconds;
  r.images_per_second = seconds > 0 ? images / seconds : 0;
  r.images_per_second_per_thread = r.images_per_second / std::max(1, threads);
  return r;
}

// Our pipeline on the original files, the same work the torchvision peer does per image:
// read, decode (at reduced scale when the file is larger than the storage size), augment,
// normalise into a float buffer.
BenchRecord bench_file_pipeline(const std::vector<fs::path>& files, const Config& config, int threads, int epochs) {
  cv::setNumThreads(1);
  Augmenter augmenter(config.augment, true);
  DecodeOptions decode;
  decode.min_short_side = config.data.scaled_decode ? config.data.storage_size : 0;
  decode.max_megapixels = config.data.max_megapixels;
  const std::size_t total = files.size() * epochs;
  std::atomic<std::size_t> next{0};
  std::atomic<std::size_t> failed{0};
  auto worker = [&] {
    std::vector<float> out(augmenter.floats_per_sample());
    for (std::size_t k; (k = next.fetch_add(1)) < total;) {
      if (interrupt_requested()) return;
      try {
        auto bytes = read_binary_file(files[k % files.size()]);
        DecodedImage img = decode_image(bytes.data(), bytes.size(), decode);
        augmenter.apply(img.rgb, mix_seed(config.run.seed, k), out.data());
      } catch (const DataError&) {
        failed++;
      }
    }
  };
  const auto t0 = Clock::now();
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  throw_if_interrupted();
  BenchRecord r = make_record("pipeline_files", "shoplens", threads, total - failed, since(t0));
  r.note = "read + decode + RandomResizedCrop + flip + ColorJitter + normalise, per-thread workers";
  return r;
}

std::optional<BenchRecord> bench_torchvision(const DataBenchOptions& o, const fs::path& file_list, int threads) {
  std::error_code ec;
  if (o.peer_script.empty() || !fs::exists(o.peer_script, ec)) {
    spdlog::warn("bench-data: torchvision peer script not found ('{}'); skipping the side-by-side run",
                 o.peer_script.string());
    return std::nullopt;
  }
  std::ostringstream cmd;
  cmd << "'" << o.python << "' '" << o.peer_script.string() << "' --manifest '" << file_list.string() << "' --threads "
      << threads << " --epochs " << o.epochs << " --image-size " << o.config.augment.image_size << " 2>&1";
  spdlog::info("bench-data: running the torchvision peer: {}", cmd.str());
  FILE* pipe = ::popen(cmd.str().c_str(), "r");
  if (!pipe) return std::nullopt;
  std::string output;
  char buffer[4096];
  std::size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) output.append(buffer, n);
  int status = ::pclose(pipe);
  // The peer prints one JSON line; take the last line that parses.
  std::istringstream lines(output);
  std::string line;
  nlohmann::json doc;
  while (std::getline(lines, line)) {
    auto parsed = nlohmann::json::parse(line, nullptr, false);
    if (!parsed.is_discarded() && parsed.is_object() && parsed.contains("images_per_s")) doc = parsed;
  }
  if (status != 0 || doc.is_null()) {
    spdlog::warn("bench-data: the torchvision peer failed (status {}): {}", status, output.substr(0, 2000));
    return std::nullopt;
  }
  BenchRecord r =
      make_record("torchvision_files", "torchvision", threads, doc.value("images", 0ULL), doc.value("seconds", 0.0));
  r.note = "torch " + doc.value("torch", std::string("?")) + ", torchvision " +
           doc.value("torchvision", std::string("?")) +
           ", PIL decode + RandomResizedCrop + flip + ColorJitter + ToTensor + Normalize";
  return r;
}

}  // namespace

// The training loader over prepared shards, `epochs` epochs with `threads` workers.
BenchRecord bench_shard_loader(const fs::path& shards, const Config& config, int threads, int epochs) {
  auto dataset = ShardDataset::open(shards, Split::kTrain);
  LoaderOptions lo = loader_options_from_config(config, true);
  lo.workers = threads;
  Loader loader(dataset, config.augment, lo);
  std::uint64_t samples = 0;
  double seconds = 0, wait = 0;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    loader.start_epoch(epoch);
    while (auto batch = loader.next()) throw_if_interrupted();
    samples += loader.stats().samples;
    seconds += loader.stats().seconds;
    wait += loader.stats().wait_seconds;
  }
  BenchRecord load = make_record("loader_shards", "shoplens", threads, samples, seconds);
  load.wait_seconds = wait;
  load.note = "mmap shards + decode + augment into batch tensors of " + std::to_string(lo.batch_size);
  return load;
}

DataBenchResult run_data_bench(const DataBenchOptions& o) {
  DataBenchResult result;
  result.environment = host_environment();
  const int threads = resolve_threads(o.config.run.threads);
  const auto& c = o.config;
  result.parameters = {{"input", c.data.input},
                       {"epochs", std::to_string(o.epochs)},
                       {"threads", std::to_string(threads)},
                       {"storage_size", std::to_string(c.data.storage_size)},
                       {"encoding", name_in(kPayloadEncodingNames, c.data.encoding)},
                       {"jpeg_quality", std::to_string(c.data.jpeg_quality)},
                       {"scaled_decode", c.data.scaled_decode ? "true" : "false"},
                       {"image_size", std::to_string(c.augment.image_size)},
                       {"augment", config_to_json(c)["augment"].dump()},
                       {"batch_size", std::to_string(c.loader.batch_size)},
                       {"prefetch_batches", std::to_string(c.loader.prefetch_batches)},
                       {"seed", std::to_string(c.run.seed)}};
  std::error_code ec;
  fs::create_directories(o.out_dir, ec);

  // 1. prepare, from scratch so every image is decoded and encoded.
  const fs::path shards = o.out_dir / "shards";
  fs::remove_all(shards, ec);
  PrepareOptions prepare = prepare_options_from_config(o.config);
  prepare.out_dir = shards;
  prepare.threads = threads;
  PrepareReport report = prepare_dataset(prepare);
  BenchRecord prep = make_record("prepare", "shoplens", threads, report.images_decoded, report.seconds);
  prep.note = "decode + validate + resize to " + std::to_string(prepare.storage_size) + " + encode " +
              name_in(kPayloadEncodingNames, o.config.data.encoding) + " + write shards";
  result.records.push_back(prep);

  // 2. the training loader over the shards.
  result.records.push_back(bench_shard_loader(shards, o.config, threads, o.epochs));

  // 3. both pipelines on the same original files (the train rows that decode).
  std::vector<fs::path> files;
  std::string list = csv_line({"path"}) + "\n";
  std::vector<char> is_train(report.total_rows, 0);
  auto records = parse_csv(read_file(shards / "records.csv"));
  const fs::path root =
      o.config.data.root.empty() ? fs::path(o.config.data.input).parent_path() : fs::path(o.config.data.root);
  const bool folder_input = fs::is_directory(o.config.data.input);
  for (std::size_t i = 1; i < records.size(); ++i) {
    const auto& f = records[i].fields;
    if (f.size() < 5 || f[4] != "train") continue;
    fs::path p(f[2]);
    fs::path full = p.is_absolute() ? p : (folder_input ? fs::path(o.config.data.input) : root) / p;
    files.push_back(fs::absolute(full));
    list += csv_line({files.back().string()}) + "\n";
  }
  if (files.empty()) throw DataError("bench-data: no train images to benchmark");
  const fs::path file_list = o.out_dir / "peer_files.csv";
  write_file_atomic(file_list, list);
  result.records.push_back(bench_file_pipeline(files, o.config, threads, o.epochs));
  if (auto peer = bench_torchvision(o, file_list, threads)) {
    result.records.push_back(*peer);
    if (peer->images_per_second > 0)
      result.speedup_vs_torchvision = result.records[2].images_per_second / peer->images_per_second;
  }
  return result;
}

std::string bench_table(const DataBenchResult& r) {
  std::ostringstream os;
  const auto& env = r.environment;
  os << "commit " << env.commit << ", " << env.cpu_model << ", LibTorch " << env.torch_version << ", " << env.date
     << "\n";
  for (const auto& [k, v] : r.parameters)
    if (k != "augment") os << k << "=" << v << " ";
  os << "\n\n";
  os << "| scenario | implementation | threads | images | seconds | images/s | images/s/thread | wait s |\n";
  os << "|---|---|---:|---:|---:|---:|---:|---:|\n";
  char line[512];
  for (const auto& x : r.records) {
    std::snprintf(line, sizeof line, "| %s | %s | %d | %llu | %.2f | %.1f | %.1f | %.2f |\n", x.scenario.c_str(),
                  x.implementation.c_str(), x.threads, static_cast<unsigned long long>(x.images), x.seconds,
                  x.images_per_second, x.images_per_second_per_thread, x.wait_seconds);
    os << line;
  }
  if (r.speedup_vs_torchvision > 0) {
    std::snprintf(line, sizeof line, "\nshoplens / torchvision on the same files and threads: %.2fx\n",
                  r.speedup_vs_torchvision);
    os << line;
  }
  return os.str();
}

std::string bench_csv(const DataBenchResult& r) {
  std::vector<std::string> header{"commit",
                                  "cpu",
                                  "torch",
                                  "date",
                                  "scenario",
                                  "implementation",
                                  "threads",
                                  "images",
                                  "seconds",
                                  "images_per_s",
                                  "images_per_s_per_thread",
                                  "wait_s",
                                  "note"};
  for (const auto& p : r.parameters) header.push_back(p.first);
  std::string out = csv_line(header) + "\n";
  for (const auto& x : r.records) {
    std::vector<std::string> row{r.environment.commit,
                                 r.environment.cpu_model,
                                 r.environment.torch_version,
                                 r.environment.date,
                                 x.scenario,
                                 x.implementation,
                                 std::to_string(x.threads),
                                 std::to_string(x.images),
                                 std::to_string(x.seconds),
                                 std::to_string(x.images_per_second),
                                 std::to_string(x.images_per_second_per_thread),
                                 std::to_string(x.wait_seconds),
                                 x.note};
    for (const auto& p : r.parameters) row.push_back(p.second);
    out += csv_line(row) + "\n";
  }
  return out;
}

std::string bench_json_lines(const DataBenchResult& r) {
  std::string out;
  for (const auto& x : r.records) {
    nlohmann::json j = {{"commit", r.environment.commit},
                        {"cpu", r.environment.cpu_model},
                        {"torch", r.environment.torch_version},
                        {"date", r.environment.date},
                        {"scenario", x.scenario},
                        {"implementation", x.implementation},
                        {"threads", x.threads},
                        {"images", x.images},
                        {"seconds", x.seconds},
                        {"images_per_s", x.images_per_second},
                        {"images_per_s_per_thread", x.images_per_second_per_thread},
                        {"wait_s", x.wait_seconds},
                        {"note", x.note}};
    for (const auto& [k, v] : r.parameters) j["params"][k] = v;
    out += j.dump() + "\n";
  }
  return out;
}

}  // namespace shoplens
