// End-to-end: sharded `score` and `score-merge`. Four shards, each started the way one launcher
// starts it (--shard, torchrun's RANK/WORLD_SIZE, a Slurm array, a Kubernetes Indexed Job), and two
// under `shoplens launch`, merge to exactly the predictions of one process; a missing shard, a
// shard given twice and an input changed under a shard are refused with the shard and rows named;
// peak memory does not grow from 10k to 1M manifest rows.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sanitizer.h"
#include "score_shard_fixture.h"
#include "scratch_suite.h"
#include "shoplens/infer/score_shard.h"
#include "test_util.h"

namespace shoplens {

std::ofstream testing::write_catalog_rows(const std::filesystem::path& dir, int rows) {
  const auto paths = testing::catalog_image_paths(dir / "catalog");
  std::ofstream out(dir / "rows.csv");
  out << "id,path\n";
  for (int row = 0; row < rows; ++row)
    out << "img" << row << "," << (dir / "catalog" / paths.at(row % paths.size())).string() << "\n";
  return out;
}

std::filesystem::path testing::score_shard_fixture() {
  return testing::shared_fixture("score-shard", [](const std::filesystem::path& dir) {
    const std::string failed = testing::make_exported_model(dir, 40, 13);
    if (!failed.empty()) return failed;
    std::ofstream out = testing::write_catalog_rows(dir, 40);
    out << "missing," << (dir / "no_such_file.jpg").string() << "\nbroken,/dev/null\nnopath,\n";
    return std::string();
  });
}

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::run_shell;
using testing::run_shoplens;

constexpr int kRows = 43;  // 40 images, a missing file, a broken path, a row without a path

class E2eScoreShard : public testing::ScratchSuite<E2eScoreShard> {
 protected:
  static void SetUpTestSuite() { fixture_ = testing::score_shard_fixture(); }
  static fs::path model() { return fixture_ / "model"; }
  static fs::path manifest() { return fixture_ / "rows.csv"; }
  // `env` goes before the program: the launcher's environment.
  static testing::CommandResult score(const fs::path& out, const std::string& extra = "", const std::string& env = "",
                                      const fs::path& input = manifest()) {
    return run_shell(env + " " + testing::shoplens_bin() + " score --weights " + model().string() + " --input " +
                     input.string() + " --out " + out.string() + " --chunk-rows 4 -b 4 --workers 1 --threads 1 " +
                     extra + " 2>&1");
  }
  // One process over the whole input, once per suite: what every merge must reproduce.
  static const std::string& single_predictions() {
    static const std::string text = [] {
      const fs::path out = scratch() / "single";
      const auto r = score(out);
      EXPECT_EQ(r.exit_code, 0) << r.output;
      return testing::read_text(out / "predictions.csv");
    }();
    return text;
  }
  static fs::path fixture_;
};
fs::path E2eScoreShard::fixture_;

TEST_F(E2eScoreShard, FourShardsFromFourLaunchersMergeToTheOneProcessPredictions) {
  const fs::path job = scratch() / "four";
  const std::vector<std::pair<std::string, std::string>> launches = {
      {"--shard 0/4", ""},
      {"", "RANK=1 WORLD_SIZE=4 LOCAL_RANK=1"},
      {"", "SLURM_ARRAY_TASK_ID=12 SLURM_ARRAY_TASK_MIN=10 SLURM_ARRAY_TASK_COUNT=4 SLURM_PROCID=0 SLURM_NTASKS=1"},
      {"--shard-count 4", "JOB_COMPLETION_INDEX=3"}};
  const std::vector<std::string> sources = {"--shard", "RANK/WORLD_SIZE", "SLURM_ARRAY_TASK_ID",
                                            "JOB_COMPLETION_INDEX"};
  for (std::size_t i = 0; i + 1 < launches.size(); ++i) {
    const auto r = score(job, launches[i].first, launches[i].second);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_THAT(r.output, AllOf(HasSubstr(fmt::format("shard {} of 4", i)), HasSubstr(sources[i])));
  }
  // Shard 3 has not run: the merge names it and its rows, and writes nothing.
  auto merged = run_shoplens("score-merge " + job.string());
  EXPECT_EQ(merged.exit_code, 1) << merged.output;
  EXPECT_THAT(merged.output, AllOf(HasSubstr("1 shard of 4 missing"), HasSubstr("3 (rows 32..43)")));
  EXPECT_FALSE(fs::exists(job / "predictions.csv"));

  const auto last = score(job, launches[3].first, launches[3].second);
  ASSERT_EQ(last.exit_code, 0) << last.output;
  EXPECT_THAT(last.output, HasSubstr(sources[3]));
  merged = run_shoplens("score-merge " + job.string() + " --input " + manifest().string() + " --price-per-hour 2");
  ASSERT_EQ(merged.exit_code, 0) << merged.output;
  EXPECT_EQ(testing::read_text(job / "predictions.csv"), single_predictions());
  const json report = testing::read_json(job / "report.json");
  EXPECT_EQ(report["rows"], kRows);
  EXPECT_EQ(report["input_rows"], kRows);
  // The three rows made unreadable, and any corrupt image of the catalog (make-data makes ~2%).
  EXPECT_EQ(report["rows_error"].get<std::size_t>(), testing::occurrences(single_predictions(), ",error,"));
  EXPECT_GE(report["rows_error"].get<std::size_t>(), 3u);
  EXPECT_EQ(report["shards"], 4);
  EXPECT_TRUE(report["fingerprints_checked_against_input"].get<bool>());
  ASSERT_EQ(report["per_shard"].size(), 4u);
  std::int64_t images = 0;
  for (const json& s : report["per_shard"]) images += s["images"].get<std::int64_t>();
  EXPECT_EQ(report["images"].get<std::int64_t>(), images);
  EXPECT_GT(report["images_per_second_per_device"].get<double>(), 0);
  EXPECT_GT(report["cost_per_million_images"].get<double>(), 0);
}

TEST_F(E2eScoreShard, ShardsUnderLaunchMergeToTheOneProcessPredictions) {
  const fs::path job = scratch() / "launch";
  const auto r =
      run_shoplens(testing::launch_args(2) + " score --weights " + model().string() + " --input " +
                   manifest().string() + " --out " + job.string() + " --chunk-rows 4 -b 4 --workers 1 --threads 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(job / "shard-00000-of-00002" / "report.json"));
  EXPECT_TRUE(fs::exists(job / "shard-00001-of-00002" / "report.json"));
  const auto merged = run_shoplens("score-merge " + job.string());
  ASSERT_EQ(merged.exit_code, 0) << merged.output;
  EXPECT_EQ(testing::read_text(job / "predictions.csv"), single_predictions());
}

// torchrun itself (the torch2 build's venv has it): its RANK/WORLD_SIZE shard the input as
// `shoplens launch`'s do. Skips where the test's Python is not a ShopLens venv.
TEST_F(E2eScoreShard, ShardsUnderTorchrunMergeToTheOneProcessPredictions) {
  if (!testing::python_is_the_venv()) GTEST_SKIP() << "no ShopLens venv (torchrun comes with its torch)";
  const fs::path torchrun = fs::path(testing::python()).parent_path() / "torchrun";
  if (!fs::exists(torchrun)) GTEST_SKIP() << torchrun.string() << " is missing";
  const fs::path job = scratch() / "torchrun";
  const auto r =
      testing::run_shell(torchrun.string() + " --standalone --nproc-per-node 2 --no-python " + testing::shoplens_bin() +
                         " score --weights " + model().string() + " --input " + manifest().string() + " --out " +
                         job.string() + " --chunk-rows 4 -b 4 --workers 1 --threads 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(job / "shard-00001-of-00002" / "report.json")) << r.output;
  const auto merged = run_shoplens("score-merge " + job.string());
  ASSERT_EQ(merged.exit_code, 0) << merged.output;
  EXPECT_EQ(testing::read_text(job / "predictions.csv"), single_predictions());
}

TEST_F(E2eScoreShard, AShardGivenTwiceOrOfAnotherCountIsRefused) {
  const fs::path job = scratch() / "twice", other = scratch() / "twice-copy";
  for (const char* shard : {"0/2", "1/2"}) ASSERT_EQ(score(job, std::string("--shard ") + shard).exit_code, 0);
  fs::create_directories(other);
  fs::copy(job / "shard-00001-of-00002", other / "shard-00001-of-00002", fs::copy_options::recursive);
  auto merged = run_shoplens("score-merge " + job.string() + " " + other.string() + " -o " +
                             (scratch() / "twice-merged").string());
  EXPECT_EQ(merged.exit_code, 1);
  EXPECT_THAT(merged.output, AllOf(HasSubstr("shard 1 of 2 appears twice"), HasSubstr("rows 20..43")));
  ASSERT_EQ(score(job, "--shard 2/3").exit_code, 0);
  merged = run_shoplens("score-merge " + job.string());
  EXPECT_EQ(merged.exit_code, 1);
  EXPECT_THAT(merged.output, HasSubstr("mixed shard counts"));
}

TEST_F(E2eScoreShard, AnInputChangedUnderAShardIsRefusedOnResumeAndAtMerge) {
  const fs::path job = scratch() / "changed", input = scratch() / "changed.csv";
  fs::copy_file(manifest(), input);
  for (const char* shard : {"0/2", "1/2"})
    ASSERT_EQ(score(job, std::string("--shard ") + shard, "", input).exit_code, 0);
  std::string text = testing::read_text(input);
  text.replace(text.find("img30,"), 6, "imgXX,");  // a row of shard 1 (rows 20..43)
  testing::write_text(input, text);
  const auto resumed = score(job, "--shard 1/2", "", input);
  EXPECT_EQ(resumed.exit_code, 1) << resumed.output;
  EXPECT_THAT(resumed.output, AllOf(HasSubstr("the input changed since shard 1 of 2"), HasSubstr("rows 20..43")));
  // Shard 0's rows did not change: it resumes (every chunk reused).
  const auto unchanged = score(job, "--shard 0/2", "", input);
  EXPECT_EQ(unchanged.exit_code, 0) << unchanged.output;
  const auto merged = run_shoplens("score-merge " + job.string() + " --input " + input.string());
  EXPECT_EQ(merged.exit_code, 1) << merged.output;
  EXPECT_THAT(merged.output, AllOf(HasSubstr("shard-00001-of-00002"), HasSubstr("the input changed")));
}

// scripts/k8s/score_indexed_job.yaml as written: its container's arguments (paths and the device
// swapped for this machine's) with each pod's JOB_COMPLETION_INDEX and its SHOPLENS_SHARD_COUNT.
TEST_F(E2eScoreShard, TheIndexedJobManifestRunsAsWritten) {
  std::istringstream yaml(testing::read_text(fs::path(testing::source_dir()) / "scripts/k8s/score_indexed_job.yaml"));
  std::string args, count, completions;
  bool in_args = false;
  for (std::string line; std::getline(yaml, line);) {
    const auto text = line.substr(std::min(line.size(), line.find_first_not_of(' ')));
    if (text.rfind("args:", 0) == 0) in_args = true;
    if (in_args && text.rfind("- --", 0) == 0) args += " " + text.substr(2);
    if (in_args && text.rfind("env:", 0) == 0) in_args = false;
    if (text.rfind("completions:", 0) == 0) completions = text.substr(13);
    if (text.rfind("value:", 0) == 0) count = text.substr(8, text.find('"', 8) - 8);
  }
  ASSERT_EQ(count, completions);
  const fs::path job = scratch() / "indexed";
  const std::map<std::string, std::string> here = {{"/data/models/m1", model().string()},
                                                   {"/data/catalog/manifest.csv", manifest().string()},
                                                   {"/data/scores/night", job.string()},
                                                   {"--batch-size=256", "--batch-size=4 --chunk-rows=4"},
                                                   {"--device=cuda", "--device=cpu --workers=1 --threads=1"}};
  for (const auto& [from, to] : here) {
    ASSERT_NE(args.find(from), std::string::npos) << from << " is not in the manifest's args:" << args;
    args.replace(args.find(from), from.size(), to);
  }
  for (int index = 0; index < std::stoi(count); ++index) {
    const auto r = run_shell(fmt::format("JOB_COMPLETION_INDEX={} SHOPLENS_SHARD_COUNT={} {} score{} 2>&1", index,
                                         count, testing::shoplens_bin(), args));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  const auto merged = run_shoplens("score-merge " + job.string());
  ASSERT_EQ(merged.exit_code, 0) << merged.output;
  EXPECT_EQ(testing::read_text(job / "predictions.csv"), single_predictions());
  EXPECT_EQ(testing::read_json(job / "report.json")["price_per_device_hour"], 2.5);
}

// Parquet in and out through tools/score_parquet/score_parquet.py (pyarrow in the torch2 venv): a
// Parquet manifest of several row groups with a null path becomes score's CSV manifest in the same
// row order; two shards' merged predictions become a typed Parquet file, one row per input row.
TEST_F(E2eScoreShard, AParquetManifestInAndParquetPredictionsOut) {
  const std::string missing = testing::pyarrow_missing();
  if (!missing.empty()) {
    if (testing::python_is_the_venv()) FAIL() << "the venv must have pyarrow (requirements-torch2.txt): " << missing;
    GTEST_SKIP() << missing;
  }
  const fs::path dir = scratch() / "parquet", job = dir / "job";
  fs::create_directories(dir);
  const std::string tool = testing::python() + " " + testing::source_dir() + "/tools/score_parquet/score_parquet.py";
  testing::write_text(dir / "make.py", R"PY(
import csv, sys
import pyarrow as pa, pyarrow.parquet as pq
rows = list(csv.DictReader(open(sys.argv[1])))
pq.write_table(pa.table({"sku": [r["id"] for r in rows], "image": [r["path"] or None for r in rows],
                         "price": [float(i) for i in range(len(rows))]}), sys.argv[2], row_group_size=10)
)PY");
  auto r = run_shell(testing::python() + " " + (dir / "make.py").string() + " " + manifest().string() + " " +
                     (dir / "catalog.parquet").string() + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_shell(tool + " to-csv " + (dir / "catalog.parquet").string() + " " + (dir / "manifest.csv").string() +
                " --id-column sku --path-column image 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(testing::read_text(dir / "manifest.csv"), testing::read_text(manifest()));
  for (const char* shard : {"0/2", "1/2"})
    ASSERT_EQ(score(job, std::string("--shard ") + shard, "", dir / "manifest.csv").exit_code, 0);
  ASSERT_EQ(run_shoplens("score-merge " + job.string()).exit_code, 0);
  r = run_shell(tool + " to-parquet " + (job / "predictions.csv").string() + " " + (dir / "p.parquet").string() +
                " 2>&1 && " + testing::python() + " -c \"import pyarrow.parquet as pq; t = pq.read_table('" +
                (dir / "p.parquet").string() +
                "'); print(t.num_rows, t.schema.field('row').type, t.schema.field('confidence').type, "
                "t.column('confidence').null_count, t.column('id')[40])\" 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::size_t errors = testing::occurrences(single_predictions(), ",error,");
  EXPECT_THAT(r.output, HasSubstr(fmt::format("{} int64 double {} missing", kRows, errors)));
}

fs::path missing_rows_csv(const fs::path& dir, std::size_t rows) {
  const fs::path file = dir / fmt::format("rows-{}.csv", rows);
  std::ofstream out(file);
  out << "id,path\n";
  for (std::size_t r = 0; r < rows; ++r)
    out << fmt::format("p{:08d},/nonexistent-shoplens-images/shelf-{:04d}/photo-{:08d}.jpg\n", r, r % 997, r);
  return file;
}

// The last shard of 4: the rows before it are read past, its own are fingerprinted and scored
// (every one an error row: the work is the rows, not the model).
TEST_F(E2eScoreShard, PeakMemoryIsFlatFrom10kTo1MManifestRows) {
  SKIP_WHERE_PROCESS_MEMORY_IS_NOT_THE_PRODUCTS();
  std::vector<long> plan_peaks, score_peaks;
  for (const std::size_t rows : {10000u, 1000000u}) {
    const fs::path csv = missing_rows_csv(scratch().path(), rows);
    const fs::path out = scratch() / fmt::format("mem-{}", rows);
    const auto plan = testing::run_shoplens_measured(
        "score --plan --shard 3/4 --chunk-rows 1000 --input " + csv.string() + " --out " + out.string(),
        scratch() / fmt::format("plan-{}.log", rows));
    ASSERT_EQ(plan.exit_code, 0) << plan.output;
    const auto scored =
        testing::run_shoplens_measured("score --shard 3/4 --weights " + model().string() + " --input " + csv.string() +
                                           " --out " + out.string() + " --chunk-rows 1000 --workers 1 --threads 1",
                                       scratch() / fmt::format("score-{}.log", rows));
    ASSERT_EQ(scored.exit_code, 0) << scored.output;
    const json report = testing::read_json(out / "shard-00003-of-00004" / "report.json");
    EXPECT_EQ(report["rows"].get<std::size_t>(), shard_rows(rows, 3, 4, 1000).size());
    EXPECT_EQ(report["rows_error"].get<std::size_t>(), shard_rows(rows, 3, 4, 1000).size());
    plan_peaks.push_back(plan.peak_kib);
    score_peaks.push_back(scored.peak_kib);
    fs::remove(csv);
  }
  std::printf("peak RSS over 10k / 1M rows: --plan %ld / %ld KiB, score %ld / %ld KiB\n", plan_peaks[0], plan_peaks[1],
              score_peaks[0], score_peaks[1]);
  // 100 times the rows: the peaks stay within 16 MiB (a row window and the model are the memory).
  EXPECT_LT(plan_peaks[1], plan_peaks[0] + 16 * 1024);
  EXPECT_LT(score_peaks[1], score_peaks[0] + 16 * 1024);
}

}  // namespace
}  // namespace shoplens
