// End-to-end: `shoplens score` with an exported model: exact row accounting with error rows,
// SIGTERM and resume without repeating or losing a row, reduced-precision drift, the
// latency-bound batch choice, and refusing to mix two jobs in one folder.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "shoplens/data/csv.h"
#include "test_util.h"

namespace shoplens {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::run_shoplens;

class E2eScore : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::ScratchDir("e2e-score");
    const fs::path catalog = *dir_ / "catalog";
    auto made = run_shoplens("make-data --out " + catalog.string() + " --num-images 80 --image-size-range 40:60 --seed 5");
    ASSERT_EQ(made.exit_code, 0) << made.output;
    auto prepared = run_shoplens("prepare --input " + (catalog / "manifest.csv").string() + " --out " +
                                 (*dir_ / "shards").string() + " --storage-size 36 --threads 2");
    ASSERT_EQ(prepared.exit_code, 0) << prepared.output;
    auto trained = run_shoplens("train --shards " + (*dir_ / "shards").string() + " --out " + (*dir_ / "run").string() +
                                " --model small_cnn --epochs 1 --batch-size 8 --threads 2 --set augment.image_size=32");
    ASSERT_EQ(trained.exit_code, 0) << trained.output;
    auto exported = run_shoplens("export --run " + (*dir_ / "run").string() + " --out " + model().string());
    ASSERT_EQ(exported.exit_code, 0) << exported.output;

    // A manifest of the catalog's files, repeated, plus rows that cannot be scored.
    const auto records = parse_csv(testing::read_text(catalog / "manifest.csv"));
    std::size_t path_col = 0;
    for (std::size_t c = 0; c < records[0].fields.size(); ++c)
      if (records[0].fields[c] == "path") path_col = c;
    std::ofstream out(manifest());
    out << "id,path\n";
    int rows = 0;
    for (int copy = 0; copy < 6; ++copy)
      for (std::size_t r = 1; r < records.size(); ++r)
        out << "img" << rows++ << "," << (catalog / records[r].fields[path_col]).string() << "\n";
    testing::write_text(*dir_ / "broken.jpg", "\xff\xd8\xff\xe0 this is not a JPEG");
    out << "broken," << (*dir_ / "broken.jpg").string() << "\n";
    out << "missing," << (*dir_ / "no_such_file.jpg").string() << "\n";
    out << "nopath,\n";
    rows_ = rows + 3;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static fs::path model() { return *dir_ / "model"; }
  static fs::path manifest() { return *dir_ / "score.csv"; }
  static std::string score_args(const fs::path& out) {
    return "score --model " + model().string() + " --input " + manifest().string() + " --out " + out.string() +
           " --chunk-rows 16 -b 4 --workers 1 --threads 1";
  }
  static std::vector<CsvRecord> predictions(const fs::path& out) {
    auto recs = parse_csv(testing::read_text(out / "predictions.csv"));
    recs.erase(recs.begin());  // header
    return recs;
  }
  static testing::ScratchDir* dir_;
  static int rows_;
};
testing::ScratchDir* E2eScore::dir_ = nullptr;
int E2eScore::rows_ = 0;

TEST_F(E2eScore, EveryRowOnceWithErrorRowsForWhatCannotBeRead) {
  const fs::path out = *dir_ / "plain";
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

TEST_F(E2eScore, SigtermThenRerunScoresEachRowExactlyOnce) {
  const fs::path reference = *dir_ / "reference";
  ASSERT_EQ(run_shoplens(score_args(reference)).exit_code, 0);

  const fs::path out = *dir_ / "killed";
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string cmd = std::string(SHOPLENS_BIN) + " " + score_args(out);
    ::execl("/bin/sh", "sh", "-c", ("exec " + cmd + " >/dev/null 2>&1").c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  auto chunks = [&] {
    int n = 0;
    std::error_code ec;
    if (fs::is_directory(out / "chunks", ec))
      for (const auto& e : fs::directory_iterator(out / "chunks")) n += e.path().extension() == ".csv";
    return n;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (chunks() < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  const int code = WEXITSTATUS(status);
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
  const fs::path out = *dir_ / "bf16";
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
  auto generous = run_shoplens(score_args(*dir_ / "lat1") + " --max-latency-ms 100000 --max-batch 16");
  ASSERT_EQ(generous.exit_code, 0) << generous.output;
  json report = json::parse(testing::read_text(*dir_ / "lat1" / "report.json"));
  EXPECT_EQ(report["batch_size"], 16);
  EXPECT_EQ(report["latency_curve"].size(), 5u);  // 1, 2, 4, 8, 16

  auto strict = run_shoplens(score_args(*dir_ / "lat2") + " --max-latency-ms 0.000001 --max-batch 16");
  ASSERT_EQ(strict.exit_code, 0) << strict.output;
  report = json::parse(testing::read_text(*dir_ / "lat2" / "report.json"));
  EXPECT_EQ(report["batch_size"], 1);  // nothing fits: the smallest batch, with the curve to show why
  EXPECT_FALSE(report["latency_curve"][0]["fits"].get<bool>());
}

}  // namespace
}  // namespace shoplens
