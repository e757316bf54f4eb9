// `shoplens score`: a resumable batch scoring job over an exported model (docs/SCORING.md).
#include <iostream>

#include "command.h"
#include "inference_flags.h"
#include "shoplens/core/logging.h"
#include "shoplens/core/runtime.h"
#include "shoplens/infer/scorer.h"

namespace shoplens::cli {
namespace {

class ScoreCommand : public Command {
 public:
  void setup(CLI::App& app) override {
    add_exported_model_flags(app, weights_, model_);
    app.add_option(
           "-i,--input", o_.input,
           "CSV (column path, optional id and label), a list file, a folder tree, one image, or prepared shards")
        ->required();
    app.add_option("-o,--out", o_.out_dir, "output folder: chunks/, predictions.csv, report.json (rerun to resume)")
        ->required();
    app.add_option("--split", o_.split, "shards: all, train, val or test");
    app.add_option("--root", o_.root, "CSV or list input: folder relative paths start from (empty: the file's folder)");
    app.add_flag("--fast-decode", o_.fast_decode,
                 "decode JPEGs with the fast DCT at reduced scale (faster; pixels differ slightly from torchvision's)");
    app.add_option("--variant", o_.variant, "weights file to load: fp32, bf16 or fp16");
    compute_.add_to(app);
    app.add_option("-b,--batch-size", o_.batch_size, "micro-batch size")->check(positive());
    app.add_option("--max-latency-ms", o_.max_latency_ms,
                   "choose the largest batch (powers of 2 up to --max-batch) whose measured p95 fits (0: off)")
        ->check(non_negative());
    app.add_option("--max-batch", o_.max_batch, "largest batch --max-latency-ms considers")->check(positive());
    app.add_option("--workers", o_.workers, "decode threads (0: usable cores)")->check(thread_count());
    app.add_option("--threads", threads_, "compute threads (0: usable cores)")->check(thread_count());
    app.add_option("--chunk-rows", o_.chunk_rows, "rows per output chunk (the unit of resume)")->check(positive());
    app.add_option("--drift-sample", o_.drift_sample, "rows compared with fp32 before a reduced-precision job (0: off)")
        ->check(non_negative());
    app.add_option("--price-per-hour", o_.price_per_hour,
                   "device price per hour, for the cost per million images (0: none)")
        ->check(non_negative());
    app.add_option("--prices", o_.prices,
                   "price table (e.g. configs/prices.json) for the cost per million images (empty: none)")
        ->check(CLI::ExistingFile)
        ->type_name("FILE");
    app.add_option("--instance", o_.instance,
                   "row of the price table the job is priced as (with --prices; empty: none)");
    app.add_option("--price-basis", o_.price_basis, "on-demand or spot price of that row")
        ->check(CLI::IsMember({"on-demand", "spot"}));
    app.add_option(
        "--shard", o_.shard.shard,
        "I/N: score the I-th of N contiguous row ranges into OUT/shard-IIIII-of-NNNNN (empty: from the "
        "environment: RANK/WORLD_SIZE, SLURM_ARRAY_TASK_ID/COUNT, SLURM_PROCID/NTASKS, JOB_COMPLETION_INDEX; "
        "none: the whole input)");
    app.add_option(
        "--shard-count", o_.shard.shard_count,
        "shards of a Kubernetes Indexed Job (JOB_COMPLETION_INDEX gives the index; 0: SHOPLENS_SHARD_COUNT)");
    app.add_flag("--plan", plan_,
                 "print the shard this process would score (rows, fingerprint, folder) as JSON and exit; no model is "
                 "loaded");
    app.add_option("--log-level", log_level_, "trace, debug, info, warn or error");
  }

  int run() override {
    set_log_level(log_level_);
    set_compute_threads(threads_);
    compute_.apply(o_.precision, o_.device);
    if (plan_) {
      std::cout << plan_score_shard(o_).dump(2) << std::endl;
      return 0;
    }
    o_.model_dir = exported_model_folder("score", weights_, model_);
    const auto report = run_score_job(o_);
    const std::filesystem::path out =
        report.contains("shard") ? o_.out_dir / report["shard"]["folder"].get<std::string>() : o_.out_dir;
    std::cout << "predictions: " << (out / "predictions.csv").string() << "\n"
              << "report: " << (out / "report.json").string() << std::endl;
    return 0;
  }

 private:
  ScoreOptions o_;
  ComputeFlags compute_;
  std::filesystem::path weights_;
  std::string model_;
  int threads_ = 0;
  bool plan_ = false;
  std::string log_level_ = "info";
};

}  // namespace

std::unique_ptr<Command> make_score_command() { return std::make_unique<ScoreCommand>(); }

}  // namespace shoplens::cli
