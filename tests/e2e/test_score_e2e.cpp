// End-to-end: `shoplens score` with an exported model: exact row accounting with error rows,
// SIGTERM and resume without repeating or losing a row, reduced-precision drift, the
// latency-bound batch choice, refusing to mix two jobs in one folder, and a full disk.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "shoplens/data/csv.h"
#include "scratch_suite.h"
#include "test_util.h"

namespace shoplens {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::run_shoplens;

class E2eScore : public testing::ScratchSuite<E2eScore> {
 protected:
  static void SetUpTestSuite() {
    fixture_ = testing::shared_fixture("score", [](const fs::path& dir) {
      const std::string failed = testing::make_exported_model(dir, 80, 5);
      if (!failed.empty()) return failed;
      // A manifest of the catalog's files, repeated, plus rows that cannot be scored.
      const auto paths = testing::catalog_image_paths(dir / "catalog");
      std::ofstream out(dir / "score.csv");
      out << "id,path\n";
      int rows = 0;
      for (int copy = 0; copy < 6; ++copy)
        for (const auto& p : paths) out << "img" << rows++ << "," << (dir / "catalog" / p).string() << "\n";
      testing::write_text(dir / "broken.jpg", "\xff\xd8\xff\xe0 this is not a JPEG");
      out << "broken," << (dir / "broken.jpg").string() << "\n";
      out << "missing," << (dir / "no_such_file.jpg").string() << "\n";
      out << "nopath,\n";
      return std::string();
    });
    rows_ = static_cast<int>(parse_csv(testing::read_text(manifest())).size()) - 1;
  }
  static fs::path model() { return fixture_ / "model"; }
  static fs::path manifest() { return fixture_ / "score.csv"; }
  static std::string score_args(const fs::path& out) {
    return "score --weights " + model().string() + " --input " + manifest().string() + " --out " + out.string() +
           " --chunk-rows 16 -b 4 --workers 1 --threads 1";
  }
  static std::vector<CsvRecord> predictions(const fs::path& out) {
    auto recs = parse_csv(testing::read_text(out / "predictions.csv"));
    recs.erase(recs.begin());  // header
    return recs;
  }
  static fs::path fixture_;  // shared, read-only inputs
  static int rows_;
};
fs::path E2eScore::fixture_;
int E2eScore::rows_ = 0;

TEST_F(E2eScore, EveryRowOnceWithErrorRowsForWhatCannotBeRead) {
  const fs::path out = scratch() / "plain";
  auto r = run_shoplens(score_args(out));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto recs = predictions(out);
  ASSERT_EQ(static_cast<int>(recs.size()), rows_);
  for (int i = 0; i < rows_; ++i) EXPECT_EQ(recs[i].fields[0], std::to_string(i));
  int errors = 0;
  for (const auto& rec : recs)
    if (rec.fields[2] == "error") {
      ++errors;
      EXPECT_FALSE(rec.fields.back().empty()) << rec.fields[1] << " has no reason";
    } else {
      EXPECT_FALSE(rec.fields[3].empty());
    }
  // The three rows added above, plus the catalog's own corrupt files (make-data makes ~2%), x6.
  EXPECT_GE(errors, 3);
  EXPECT_EQ((errors - 3) % 6, 0);
  for (int i = rows_ - 3; i < rows_; ++i) EXPECT_EQ(recs[i].fields[2], "error") << recs[i].fields[1];
  EXPECT_EQ(recs[rows_ - 3].fields[1], "broken");
  EXPECT_NE(recs[rows_ - 2].fields.back().find("cannot read"), std::string::npos) << recs[rows_ - 2].fields.back();
  const json report = json::parse(testing::read_text(out / "report.json"));
  EXPECT_EQ(report["rows"], rows_);
  EXPECT_EQ(report["rows_error"], errors);
  for (const char* key : {"p50", "p95", "p99"}) EXPECT_GT(report["batch_latency_ms"][key].get<double>(), 0.0) << key;
  EXPECT_GT(report["images_per_second"].get<double>(), 0.0);
  EXPECT_TRUE(report["batch_sizes"].contains("4"));

  // Another job (another precision) in the same folder is refused, the folder left as it was.
  auto other = run_shoplens(score_args(out) + " --precision bf16");
  EXPECT_EQ(other.exit_code, 2) << other.output;
  EXPECT_NE(other.output.find("holds another job"), std::string::npos) << other.output;
}

// -m/--model PATH, score's spelling before the one grammar (issue 44), still scores, and warns.
TEST_F(E2eScore, TheOldModelSpellingStillScoresAndWarns) {
  const fs::path out = scratch() / "old_spelling";
  std::string args = score_args(out);
  args.replace(args.find("--weights"), 9, "-m");
  auto r = run_shoplens(args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(predictions(out).size(), static_cast<std::size_t>(rows_));
  EXPECT_NE(r.output.find("--model PATH is deprecated: use --weights PATH"), std::string::npos) << r.output;
}

TEST_F(E2eScore, ALabelledInputGetsTheMetricsOfItsPredictions) {
  // The catalog's own manifest has a label column; its paths are relative to --root.
  const fs::path manifest = scratch() / "labelled.csv";
  fs::copy_file(fixture_ / "catalog" / "manifest.csv", manifest, fs::copy_options::overwrite_existing);
  const fs::path out = scratch() / "labelled";
  auto r = run_shoplens("score --weights " + model().string() + " --input " + manifest.string() + " --root " +
                        (fixture_ / "catalog").string() + " --out " + out.string() + " -b 8 --workers 1 --threads 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json report = testing::read_json(out / "report.json");
  ASSERT_TRUE(report.contains("metrics")) << report.dump(2);
  const json& m = report["metrics"];
  // Recount from the rows: predicted label against the manifest's label.
  const auto labels = parse_csv(testing::read_text(manifest));
  std::size_t label_col = 0;
  for (std::size_t c = 0; c < labels[0].fields.size(); ++c)
    if (labels[0].fields[c] == "label") label_col = c;
  int ok = 0, right = 0;
  for (const auto& rec : predictions(out)) {
    if (rec.fields[2] != "ok") continue;
    ++ok;
    right += rec.fields[3] == labels.at(std::stoul(rec.fields[0]) + 1).fields[label_col];
  }
  EXPECT_EQ(m["samples"].get<int>(), ok);
  EXPECT_EQ(m["rows"]["unreadable"].get<int>(), report["rows_error"].get<int>());
  EXPECT_NEAR(m["accuracy"].get<double>(), static_cast<double>(right) / ok, 1e-12);
  EXPECT_TRUE(m.contains("macro_f1") && m.contains("ece") && m.contains("confusion"));
}

TEST_F(E2eScore, PredictFromTheRunItsCheckpointAndItsExportAgreesWithScore) {
  // One model, four ways in: the export (score and predict), the run folder, the run's checkpoint.
  const fs::path images = fixture_ / "catalog" / "images";
  const fs::path checkpoint = fixture_ / "run" / "checkpoints" / "best.ckpt";
  std::map<std::string, std::map<std::string, std::string>> top1;  // source -> id -> label
  for (const auto& [name, source] : std::vector<std::pair<std::string, fs::path>>{
           {"export", model()}, {"run", fixture_ / "run"}, {"checkpoint", checkpoint}}) {
    const fs::path out = scratch() / ("predict-" + name + ".csv");
    auto r = run_shoplens("predict --weights " + source.string() + " --input " + images.string() + " --out " +
                          out.string() + " --top-k 1 --threads 1 --workers 1");
    ASSERT_EQ(r.exit_code, 0) << name << ": " << r.output;
    auto recs = parse_csv(testing::read_text(out));
    ASSERT_GT(recs.size(), 10u);
    // row, id, true_label (class folders), status, prediction, confidence, ...
    for (std::size_t i = 1; i < recs.size(); ++i)
      top1[name][recs[i].fields[1]] = recs[i].fields[4] + "@" + recs[i].fields[5];
  }
  EXPECT_EQ(top1["run"], top1["export"]);
  EXPECT_EQ(top1["checkpoint"], top1["export"]);
}

TEST_F(E2eScore, SigtermThenRerunScoresEachRowExactlyOnce) {
  const fs::path reference = scratch() / "reference";
  ASSERT_EQ(run_shoplens(score_args(reference)).exit_code, 0);

  const fs::path out = scratch() / "killed";
  auto chunks = [&] {
    int n = 0;
    std::error_code ec;
    if (fs::is_directory(out / "chunks", ec))
      for (const auto& e : fs::directory_iterator(out / "chunks")) n += e.path().extension() == ".csv";
    return n;
  };
  const std::string cmd = testing::shoplens_bin() + " " + score_args(out);
  const int code = testing::interrupt_when(
      cmd, [&] { return chunks() >= 2; }, 60, 2);
  ASSERT_TRUE(code == 130 || code == 0) << code;
  if (code == 130) {
    EXPECT_FALSE(fs::exists(out / "predictions.csv"));
  }

  auto resumed = run_shoplens(score_args(out));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const json report = json::parse(testing::read_text(out / "report.json"));
  if (code == 130) {
    EXPECT_GE(report["chunks_reused"].get<int>(), 2);
  }
  // The resumed output is the uninterrupted one, row for row.
  EXPECT_EQ(testing::read_text(out / "predictions.csv"), testing::read_text(reference / "predictions.csv"));
}

TEST_F(E2eScore, ReducedPrecisionReportsDriftFirst) {
  const fs::path out = scratch() / "bf16";
  auto r = run_shoplens(score_args(out) + " --precision bf16 --drift-sample 32");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("bf16 vs fp32 on"), std::string::npos) << r.output;
  const json report = json::parse(testing::read_text(out / "report.json"));
  EXPECT_GE(report["drift"]["rows_compared"].get<int>(), 24);  // the readable ones of the first 32
  EXPECT_LE(report["drift"]["rows_compared"].get<int>(), 32);
  EXPECT_GE(report["drift"]["top1_agreement"].get<double>(), 0.9);
  EXPECT_LT(report["drift"]["max_prob_diff"].get<double>(), 0.1);
}

TEST_F(E2eScore, MaxLatencyPicksTheLargestBatchWhoseP95Fits) {
  auto generous = run_shoplens(score_args(scratch() / "lat1") + " --max-latency-ms 100000 --max-batch 16");
  ASSERT_EQ(generous.exit_code, 0) << generous.output;
  json report = json::parse(testing::read_text(scratch() / "lat1" / "report.json"));
  EXPECT_EQ(report["batch_size"], 16);
  EXPECT_EQ(report["latency_curve"].size(), 5u);  // 1, 2, 4, 8, 16

  auto strict = run_shoplens(score_args(scratch() / "lat2") + " --max-latency-ms 0.000001 --max-batch 16");
  ASSERT_EQ(strict.exit_code, 0) << strict.output;
  report = json::parse(testing::read_text(scratch() / "lat2" / "report.json"));
  EXPECT_EQ(report["batch_size"], 1);  // nothing fits: the smallest batch, with the curve to show why
  EXPECT_FALSE(report["latency_curve"][0]["fits"].get<bool>());
}

TEST_F(E2eScore, PriceTableRowGivesTheCostPerMillionPerDevice) {
  const fs::path prices = scratch() / "prices.json";
  const json row_cpu = {{"name", "cpu-vm"},         {"provider", "Test"},        {"kind", "cpu"},
                        {"accelerators", 0},        {"on_demand_per_hour", 0.4}, {"spot_per_hour", 0.1},
                        {"source", "test fixture"}, {"date", "2026-11-23"}};
  json row_gpu8 = row_cpu;
  row_gpu8["name"] = "gpu-8x";
  row_gpu8["kind"] = "gpu";
  row_gpu8["accelerators"] = 8;
  row_gpu8["on_demand_per_hour"] = 32.0;
  row_gpu8["spot_per_hour"] = 9.6;
  testing::write_text(prices, json{{"offers", {row_cpu, row_gpu8}}}.dump());

  auto r = run_shoplens(score_args(scratch() / "price-cpu") + " --prices " + prices.string() + " --instance cpu-vm");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  json report = json::parse(testing::read_text(scratch() / "price-cpu" / "report.json"));
  double ips = report["images_per_second"].get<double>();
  ASSERT_GT(ips, 0.0);
  EXPECT_NEAR(report["cost_per_million_images"].get<double>(), 0.4 / (ips * 3600) * 1e6, 1e-9);
  EXPECT_EQ(report["cost"]["instance"], "cpu-vm");
  EXPECT_EQ(report["cost"]["source"], "test fixture");
  EXPECT_EQ(report["cost"]["date"], "2026-11-23");

  // An 8-GPU instance at spot: one job uses one device, so the price per device is 9.6 / 8.
  r = run_shoplens(score_args(scratch() / "price-gpu") + " --prices " + prices.string() +
                   " --instance gpu-8x --price-basis spot");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("measured on cpu but priced as gpu-8x"), std::string::npos) << r.output;
  report = json::parse(testing::read_text(scratch() / "price-gpu" / "report.json"));
  ips = report["images_per_second"].get<double>();
  EXPECT_DOUBLE_EQ(report["cost"]["price_per_device_hour"].get<double>(), 1.2);
  EXPECT_EQ(report["cost"]["basis"], "spot");
  EXPECT_NEAR(report["cost_per_million_images"].get<double>(), 1.2 / (ips * 3600) * 1e6, 1e-9);

  // The same command again reuses every chunk and scores nothing, yet reports the job's rate (what
  // the chunks recorded when they were scored) and its cost, never 0 images/s and no cost.
  r = run_shoplens(score_args(scratch() / "price-gpu") + " --prices " + prices.string() +
                   " --instance gpu-8x --price-basis spot");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json rerun = json::parse(testing::read_text(scratch() / "price-gpu" / "report.json"));
  EXPECT_EQ(rerun["chunks_reused"], rerun["chunks"]);
  EXPECT_EQ(rerun["images_scored_this_run"], 0);
  ASSERT_TRUE(rerun["images_per_second"].is_number()) << rerun.dump(2);
  EXPECT_NEAR(rerun["images_per_second"].get<double>(), ips, 1e-3 * ips);  // the first run's figures
  EXPECT_NE(rerun["throughput"]["source"].get<std::string>().find("recorded"), std::string::npos);
  EXPECT_NEAR(rerun["cost_per_million_images"].get<double>(), report["cost_per_million_images"].get<double>(),
              1e-3 * report["cost_per_million_images"].get<double>());
  EXPECT_EQ(r.output.find("0.0 images/s"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("batch latency not measured"), std::string::npos) << r.output;

  // Mistakes fail before any scoring, with exit 2 and the file, row and nearest name.
  auto unknown =
      run_shoplens(score_args(scratch() / "price-bad") + " --prices " + prices.string() + " --instance gpu-8");
  EXPECT_EQ(unknown.exit_code, 2) << unknown.output;
  EXPECT_NE(unknown.output.find("did you mean 'gpu-8x'"), std::string::npos) << unknown.output;
  json no_source = row_cpu;
  no_source.erase("source");
  testing::write_text(scratch() / "bad_prices.json", json{{"offers", {no_source}}}.dump());
  auto bad = run_shoplens(score_args(scratch() / "price-bad") + " --prices " +
                          (scratch() / "bad_prices.json").string() + " --instance cpu-vm");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("bad_prices.json: offers[0] ('cpu-vm'): missing \"source\""), std::string::npos)
      << bad.output;
  EXPECT_FALSE(fs::exists(scratch() / "price-bad" / "chunks"));
  auto both = run_shoplens(score_args(scratch() / "price-bad") + " --prices " + prices.string() +
                           " --instance cpu-vm --price-per-hour 2");
  EXPECT_EQ(both.exit_code, 2) << both.output;
}

// Runs `shoplens <args>` in a child whose files may not grow past `max_file_bytes`
// (RLIMIT_FSIZE: the kernel's stand-in for a full disk that needs no root). With `ignore_sigxfsz`
// write() fails with EFBIG as it would with ENOSPC; without it the kernel kills the process
// mid-write with SIGXFSZ, like a crash. Output goes through a pipe, which the limit does not cover.
testing::CommandResult run_with_file_size_limit(const std::string& args, rlim_t max_file_bytes, bool ignore_sigxfsz) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
  const std::string cmd = testing::shoplens_bin() + " " + args;
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::close(fds[0]);
    ::close(fds[1]);
    const rlimit limit{max_file_bytes, max_file_bytes};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    ::signal(SIGXFSZ, ignore_sigxfsz ? SIG_IGN : SIG_DFL);  // ignored dispositions survive exec
    ::execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(fds[1]);
  testing::CommandResult result;
  char buffer[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buffer, sizeof buffer)) > 0) result.output.append(buffer, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

// Each chunk file present must be whole: its rows are exactly the chunk's rows, in order, then its stamp.
void expect_only_complete_chunks(const fs::path& out, int chunk_rows, int total_rows) {
  for (const auto& e : fs::directory_iterator(out / "chunks")) {
    const std::string name = e.path().filename().string();
    if (name[0] == '.') continue;  // a temporary: never taken as a chunk (checked by the caller)
    ASSERT_EQ(name.rfind("chunk-", 0), 0u) << name;
    const int index = std::stoi(name.substr(6, 6));
    auto recs = parse_csv(testing::read_text(e.path()));
    ASSERT_FALSE(recs.empty()) << name;
    ASSERT_EQ(recs.back().fields.at(0).rfind("#shoplens-chunk", 0), 0u) << name << " ends with its row fingerprints";
    recs.pop_back();
    const int expected = std::min(chunk_rows, total_rows - index * chunk_rows);
    ASSERT_EQ(static_cast<int>(recs.size()), expected) << name << " is not a whole chunk";
    for (int i = 0; i < expected; ++i) EXPECT_EQ(recs[i].fields[0], std::to_string(index * chunk_rows + i)) << name;
  }
}

int hidden_files(const fs::path& dir) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.path().filename().string()[0] == '.';
  return n;
}

TEST_F(E2eScore, FullDiskFailsClearlyLeavesOnlyWholeChunksAndARerunCompletes) {
  const fs::path reference = scratch() / "disk-reference";
  ASSERT_EQ(run_shoplens(score_args(reference)).exit_code, 0);
  const auto chunk_bytes = fs::file_size(reference / "chunks" / "chunk-000000.csv");
  const auto predictions_bytes = fs::file_size(reference / "predictions.csv");
  ASSERT_GT(predictions_bytes, 4 * chunk_bytes);

  // 1. No room even for one chunk: the first chunk write fails; clear error, exit 1, no chunk.
  const fs::path out = scratch() / "disk";
  auto full = run_with_file_size_limit(score_args(out), chunk_bytes / 2, /*ignore_sigxfsz=*/true);
  EXPECT_EQ(full.exit_code, 1) << full.output;
  EXPECT_NE(full.output.find("chunk-000000.csv"), std::string::npos) << full.output;  // names the file
  EXPECT_NE(full.output.find("File too large"), std::string::npos) << full.output;    // and the reason (EFBIG)
  EXPECT_NE(full.output.find("rerun the same command to resume"), std::string::npos) << full.output;
  ASSERT_TRUE(fs::exists(out / "score_job.json"));
  expect_only_complete_chunks(out, 16, rows_);
  EXPECT_FALSE(fs::exists(out / "chunks" / "chunk-000000.csv"));
  EXPECT_EQ(hidden_files(out / "chunks"), 0) << "the failed writer's temporary must be removed";
  EXPECT_FALSE(fs::exists(out / "predictions.csv"));
  EXPECT_FALSE(fs::exists(out / "report.json"));

  // 2. Room for chunks but not for the joined predictions.csv: every chunk is written, the join
  //    fails with the file named, and predictions.csv does not exist (not even truncated).
  auto join_full = run_with_file_size_limit(score_args(out), (chunk_bytes + predictions_bytes) / 2, true);
  EXPECT_EQ(join_full.exit_code, 1) << join_full.output;
  EXPECT_NE(join_full.output.find("predictions.csv"), std::string::npos) << join_full.output;
  EXPECT_NE(join_full.output.find("File too large"), std::string::npos) << join_full.output;
  expect_only_complete_chunks(out, 16, rows_);
  EXPECT_FALSE(fs::exists(out / "predictions.csv"));
  EXPECT_EQ(hidden_files(out), 0);

  // 3. The same limit with SIGXFSZ at its default (which killed the process, exit 153, leaving its
  //    temporary behind): shoplens ignores the signal itself, so it is the same clean error.
  const fs::path crashed = scratch() / "disk-crash";
  auto killed = run_with_file_size_limit(score_args(crashed), chunk_bytes / 2, /*ignore_sigxfsz=*/false);
  EXPECT_EQ(killed.exit_code, 1) << killed.output;
  EXPECT_NE(killed.output.find("File too large"), std::string::npos) << killed.output;
  expect_only_complete_chunks(crashed, 16, rows_);
  EXPECT_FALSE(fs::exists(crashed / "chunks" / "chunk-000000.csv"));
  EXPECT_EQ(hidden_files(crashed / "chunks"), 0) << "the failed writer's temporary must be removed";

  // Space is back: both folders complete, every row exactly once, the same bytes as the reference.
  for (const fs::path& dir : {out, crashed}) {
    auto rerun = run_shoplens(score_args(dir));
    ASSERT_EQ(rerun.exit_code, 0) << rerun.output;
    const auto recs = predictions(dir);
    ASSERT_EQ(static_cast<int>(recs.size()), rows_);
    for (int i = 0; i < rows_; ++i) EXPECT_EQ(recs[i].fields[0], std::to_string(i));
    EXPECT_EQ(testing::read_text(dir / "predictions.csv"), testing::read_text(reference / "predictions.csv"));
    EXPECT_EQ(hidden_files(dir / "chunks"), 0) << dir;
    EXPECT_EQ(hidden_files(dir), 0) << dir;
  }
  const json report = json::parse(testing::read_text(out / "report.json"));
  EXPECT_EQ(report["chunks_reused"].get<int>(), report["chunks"].get<int>());  // step 2 wrote them all
}

}  // namespace
}  // namespace shoplens
