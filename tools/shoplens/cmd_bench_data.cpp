// `shoplens bench-data`: prepare and loader throughput, side by side with torchvision.
#include <iostream>

#include <spdlog/spdlog.h>

#include "command.h"
#include "shoplens/bench/data_bench.h"
#include "shoplens/core/atomic_file.h"
#include "shoplens/core/run_dir.h"

namespace shoplens::cli {
namespace {

class BenchDataCommand : public Command {
 public:
  void setup(CLI::App& app) override {
    options_.add_to(app);
    options_.add_flag_for(app, "-i,--input", "data.input", "CSV manifest or ImageFolder root to benchmark on");
    options_.add_flag_for(app, "-o,--out", "run.dir", "folder for shards and results");
    app.add_option("--epochs", epochs_, "passes over the train split for each pipeline")->check(positive());
    app.add_option("--format", format_, "stdout format: table, json or csv")
        ->check(CLI::IsMember({"table", "json", "csv"}));
    app.add_option("--python", python_, "Python with torch and torchvision for the peer run");
    app.add_option("--peer-script", peer_script_,
                   "the torchvision pipeline script (\"shipped\": scripts/bench/torchvision_pipeline.py, shipped with "
                   "the program; empty: skip the peer)");
  }

  int run() override {
    auto config = begin(options_);
    if (!config) return 0;
    if (config->data.input.empty()) throw UsageError("bench-data: --input (or data.input) is required");
    DataBenchOptions o;
    o.config = *config;
    o.out_dir = open_run_dir(*config, "bench-data");
    o.epochs = epochs_;
    o.python = python_;
    o.peer_script = peer_script_.empty() ? std::filesystem::path()
                                         : shipped_or(peer_script_, "scripts/bench/torchvision_pipeline.py");
    DataBenchResult result = run_data_bench(o);
    write_file_atomic(o.out_dir / "bench-data.md", bench_table(result));
    write_file_atomic(o.out_dir / "bench-data.csv", bench_csv(result));
    write_file_atomic(o.out_dir / "bench-data.jsonl", bench_json_lines(result));
    if (format_ == "json")
      std::cout << bench_json_lines(result);
    else if (format_ == "csv")
      std::cout << bench_csv(result);
    else
      std::cout << bench_table(result);
    spdlog::info("bench-data: results in {}", o.out_dir.string());
    return 0;
  }

 private:
  ConfigOptions options_;
  int epochs_ = 1;
  std::string format_ = "table";
  std::string python_ = "/usr/bin/python3";
  std::string peer_script_ = kShipped;
};

}  // namespace

std::unique_ptr<Command> make_bench_data_command() { return std::make_unique<BenchDataCommand>(); }

}  // namespace shoplens::cli
