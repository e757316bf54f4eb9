// End-to-end: the real `shoplens` binary on tiny data the tests make themselves.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "shoplens/core/runtime.h"
#include "shoplens/data/image_io.h"
#include "test_util.h"

namespace shoplens {
namespace {

namespace fs = std::filesystem;
using testing::run_shoplens;

using testing::read_json;

TEST(E2eCli, VersionHelpAndTypos) {
  auto version = run_shoplens("--version");
  EXPECT_EQ(version.exit_code, 0);
  // The LibTorch named is the one this build links (1.13 or 2.x), whatever the layout around it.
  EXPECT_NE(version.output.find("LibTorch " + torch_version()), std::string::npos) << version.output;
  EXPECT_NE(version.output.find("CUDA "), std::string::npos);
  EXPECT_NE(version.output.find("commit "), std::string::npos);

  auto typo = run_shoplens("prepar --input x");
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.output.find("did you mean 'prepare'"), std::string::npos) << typo.output;

  auto help = run_shoplens("load --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.output.find("--batch-size"), std::string::npos);
  // Defaults are shown: the line of --batch-size names 32 (CLI11 1.x writes "=32", 2.x "[32]").
  const auto line_start = help.output.rfind('\n', help.output.find("--batch-size")) + 1;
  const auto batch_line = help.output.substr(line_start, help.output.find('\n', line_start) - line_start);
  EXPECT_NE(batch_line.find("32"), std::string::npos) << "defaults are shown: " << help.output;

  auto bad_flag = run_shoplens("prepare --no-such-flag");
  EXPECT_EQ(bad_flag.exit_code, 2);
  // A mistyped flag gets the nearest flag of its verb, as a mistyped verb gets the nearest verb.
  auto flag_typo = run_shoplens("train --epoch 1");
  EXPECT_EQ(flag_typo.exit_code, 2) << flag_typo.output;
  EXPECT_NE(flag_typo.output.find("did you mean '--epochs'"), std::string::npos) << flag_typo.output;
}

// NaN passed every bound (it compares false), and 40000 decode threads aborted the process.
TEST(E2eCli, NanInfiniteAndAbsurdNumbersAreUsageErrorsNamingTheFlag) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"score -w m -i i.csv -o o --price-per-hour nan", "--price-per-hour"},
      {"score -w m -i i.csv -o o --price-per-hour inf", "--price-per-hour"},
      {"score -w m -i i.csv -o o --workers 40000", "--workers"},
      {"score -w m -i i.csv -o o --max-latency-ms -nan", "--max-latency-ms"},
      {"bench-train --model small_cnn --threads 1e9", "--threads"},
      {"launch --grace-seconds nan -- true", "--grace-seconds"},
      {"launch --nproc-per-node 0 -- true", "--nproc-per-node"},
      {"train --shards x --lr nan", "optim.lr"},
      {"train --shards x --set optim.lr=1e400", "optim.lr"},
  };
  for (const auto& [args, flag] : cases) {
    auto r = run_shoplens(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(flag), std::string::npos) << args << "\n" << r.output;
  }
}

TEST(E2eCli, ConfigErrorsExitTwoAndNameTheKey) {
  testing::ScratchDir dir("e2e-config");
  testing::write_text(dir / "c.json", R"({"loader": {"batch_sise": 8}})");
  auto r = run_shoplens("config --config " + (dir / "c.json").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("loader.batch_sise"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("did you mean 'batch_size'"), std::string::npos) << r.output;

  auto printed = run_shoplens("load --print-config --set loader.batch_size=8 --seed 5 2>/dev/null");
  ASSERT_EQ(printed.exit_code, 0) << printed.output;
  auto doc = nlohmann::json::parse(printed.output);
  EXPECT_EQ(doc["loader"]["batch_size"], 8);
  EXPECT_EQ(doc["run"]["seed"], 5);
}

TEST(E2ePipeline, MakeDataPrepareLoad) {
  testing::ScratchDir dir("e2e-pipeline");
  const fs::path catalog = dir / "catalog", shards = dir / "shards", run = dir / "load";
  auto made = run_shoplens("make-data --out " + catalog.string() +
                           " --num-images 120 --image-size-range 64:128 --corrupt-fraction 0.05 --seed 3");
  ASSERT_EQ(made.exit_code, 0) << made.output;

  auto prepared = run_shoplens("prepare --input " + (catalog / "manifest.csv").string() + " --out " + shards.string() +
                               " --storage-size 48 --records-per-shard 32 --threads 2");
  ASSERT_EQ(prepared.exit_code, 0) << prepared.output;
  auto report = read_json(shards / "report.json");
  EXPECT_EQ(report["total_rows"], 120);
  EXPECT_TRUE(report["accounted"].get<bool>());
  EXPECT_GE(report["quarantined"].get<int>(), 1);  // the corrupted files are reported, not dropped
  EXPECT_EQ(report["kept"].get<int>() + report["quarantined"].get<int>(), 120);
  EXPECT_TRUE(fs::exists(shards / "config.json"));  // the resolved config of the run
  EXPECT_TRUE(fs::exists(shards / "prepare.log"));
  EXPECT_EQ(read_json(shards / "config.json")["data"]["storage_size"], 48);

  auto loaded = run_shoplens("load --shards " + shards.string() + " --batch-size 8 --workers 2 --epochs 2 " +
                             "--set augment.image_size=40 --set loader.drop_last=false --out " + run.string() +
                             " --preview " + (dir / "preview.png").string() + " 2>/dev/null");
  ASSERT_EQ(loaded.exit_code, 0) << loaded.output;
  auto result = read_json(run / "load.json");
  ASSERT_EQ(result["epochs"].size(), 2u);
  for (const auto& epoch : result["epochs"]) {
    EXPECT_EQ(epoch["samples"], result["samples_in_split"]);
    EXPECT_EQ(epoch["not_delivered"], 0);
    EXPECT_GT(epoch["samples_per_second"].get<double>(), 0.0);
  }
  // The preview is a PNG grid of the first batch: 8 tiles of 40 px enlarged to 192, 4 to a row,
  // each with a caption strip under it.
  const std::vector<std::uint8_t> preview = read_binary_file(dir / "preview.png");
  ASSERT_EQ(sniff_format(preview.data(), preview.size()), ImageFormat::kPng);
  const cv::Size grid = decode_image(preview.data(), preview.size()).rgb.size();
  EXPECT_EQ(grid.width, 4 * 192);
  EXPECT_GT(grid.height, 2 * 192);
  EXPECT_TRUE(fs::exists(run / "config.json"));

  // A re-run reuses every shard.
  auto again = run_shoplens("prepare --input " + (catalog / "manifest.csv").string() + " --out " + shards.string() +
                            " --storage-size 48 --records-per-shard 32");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(read_json(shards / "report.json")["shards_written"], 0);
}

TEST(E2ePipeline, BadInputsExitNonZeroWithTheFileNamed) {
  testing::ScratchDir dir("e2e-bad");
  auto missing = run_shoplens("prepare --input " + (dir / "nope.csv").string() + " --out " + (dir / "o").string());
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find("nope.csv"), std::string::npos) << missing.output;

  testing::write_text(dir / "m.csv", "file,label\na.jpg,x\n");
  auto no_column = run_shoplens("prepare --input " + (dir / "m.csv").string() + " --out " + (dir / "o").string());
  EXPECT_EQ(no_column.exit_code, 1);
  EXPECT_NE(no_column.output.find("m.csv:1: no 'path' column"), std::string::npos) << no_column.output;

  testing::write_text(dir / "empty.csv", "path,label\n");
  auto empty = run_shoplens("prepare --input " + (dir / "empty.csv").string() + " --out " + (dir / "o").string());
  EXPECT_EQ(empty.exit_code, 1);
  EXPECT_NE(empty.output.find("empty dataset"), std::string::npos) << empty.output;

  auto not_prepared = run_shoplens("load --shards " + dir.path().string());
  EXPECT_EQ(not_prepared.exit_code, 1);
  EXPECT_NE(not_prepared.output.find("not a prepared dataset"), std::string::npos) << not_prepared.output;
}

TEST(E2ePipeline, SigtermStopsPrepareCleanlyAndARerunCompletes) {
  testing::ScratchDir dir("e2e-sigterm");
  const fs::path catalog = dir / "catalog", shards = dir / "shards";
  ASSERT_EQ(
      run_shoplens("make-data --out " + catalog.string() + " --num-images 400 --image-size-range 300:600 --seed 9")
          .exit_code,
      0);
  const std::string cmd = testing::shoplens_bin() + " prepare --input " + (catalog / "manifest.csv").string() +
                          " --out " + shards.string() + " --records-per-shard 16 --threads 1";
  // Signalled once the first shard is complete, so the run is really mid-way.
  const auto first_shard_done = [&] { return fs::exists(shards / "train-00000.summary.json"); };
  EXPECT_EQ(testing::interrupt_when(cmd, first_shard_done, 60, 20), 130);
  EXPECT_FALSE(fs::exists(shards / "dataset.json"));  // an interrupted run never looks finished

  auto rerun = run_shoplens("prepare --input " + (catalog / "manifest.csv").string() + " --out " + shards.string() +
                            " --records-per-shard 16 --threads 2");
  ASSERT_EQ(rerun.exit_code, 0) << rerun.output;
  auto report = read_json(shards / "report.json");
  EXPECT_GE(report["shards_reused"].get<int>(), 1);
  EXPECT_EQ(report["kept"].get<int>() + report["quarantined"].get<int>(), 400);
}

}  // namespace
}  // namespace shoplens
