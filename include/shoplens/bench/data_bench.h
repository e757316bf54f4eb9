// The data pipeline benchmark behind `shoplens bench-data`: prepare throughput, loader throughput
// over shards, our decode+augment pipeline on the original files, and the torchvision peer on the
// same files and thread count, in one run so the ratio holds on a noisy machine.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "shoplens/bench/bench_results.h"
#include "shoplens/core/config.h"

namespace shoplens {

struct BenchRecord {
  std::string scenario;        // prepare | loader_shards | pipeline_files | torchvision_files
  std::string implementation;  // shoplens | torchvision
  int threads = 1;
  std::uint64_t images = 0;
  double seconds = 0;
  double images_per_second = 0;
  double images_per_second_per_thread = 0;
  double wait_seconds = 0;  // loader only: time the consumer waited
  std::string note;
};

struct DataBenchOptions {
  Config config;  // data.input, augment.*, loader.*, run.threads
  std::filesystem::path out_dir;
  int epochs = 1;
  std::string python = "/usr/bin/python3";
  std::filesystem::path peer_script;  // empty: skip the torchvision peer
};

struct DataBenchResult {
  std::vector<BenchRecord> records;
  BenchEnvironment environment;                                 // host_environment()
  std::vector<std::pair<std::string, std::string>> parameters;  // every setting that shapes the figures
  double speedup_vs_torchvision = 0;  // pipeline_files / torchvision_files images/s, 0 if no peer
};

DataBenchResult run_data_bench(const DataBenchOptions& options);

std::string bench_table(const DataBenchResult& result);
std::string bench_csv(const DataBenchResult& result);
std::string bench_json_lines(const DataBenchResult& result);

}  // namespace shoplens
