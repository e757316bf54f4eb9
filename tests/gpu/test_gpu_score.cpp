// CUDA only (ctest label gpu; run on a lent GPU machine): `shoplens score --device cuda` (pinned
// host batches, non-blocking copies on a separate stream, one batch copied ahead of compute)
// must give the CPU job's predictions: the same rows, labels and error rows, probabilities
// within float rounding.
#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "shoplens/core/runtime.h"
#include "shoplens/data/csv.h"
#include "test_util.h"

namespace shoplens {
namespace {

namespace fs = std::filesystem;
using testing::run_shoplens;

std::vector<CsvRecord> read_predictions(const fs::path& out) {
  auto recs = parse_csv(testing::read_text(out / "predictions.csv"));
  recs.erase(recs.begin());  // header
  return recs;
}

TEST(GpuScore, CudaPredictionsEqualCpuPredictions) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  testing::ScratchDir dir("gpu-score");
  ASSERT_EQ(run_shoplens("make-data --out " + (dir / "catalog").string() +
                         " --num-images 120 --image-size-range 40:80 --seed 9")
                .exit_code,
            0);
  ASSERT_EQ(run_shoplens("prepare --input " + (dir / "catalog" / "manifest.csv").string() + " --out " +
                         (dir / "shards").string() + " --storage-size 40")
                .exit_code,
            0);
  auto trained = run_shoplens("train --shards " + (dir / "shards").string() + " --out " + (dir / "run").string() +
                              " --model small_cnn --epochs 1 --batch-size 8 --device cpu --set augment.image_size=32");
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  auto exported = run_shoplens("export --run " + (dir / "run").string() + " --out " + (dir / "model").string());
  ASSERT_EQ(exported.exit_code, 0) << exported.output;

  // Batch 8 with 2 workers: several batches wait in the queue, so the copy-ahead path runs.
  const std::string common = "score --weights " + (dir / "model").string() + " --input " +
                             (dir / "catalog" / "manifest.csv").string() + " --chunk-rows 32 -b 8 --workers 2";
  auto cpu = run_shoplens(common + " --device cpu --out " + (dir / "cpu").string());
  ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
  auto gpu = run_shoplens(common + " --device cuda --out " + (dir / "cuda").string());
  ASSERT_EQ(gpu.exit_code, 0) << gpu.output;
  const auto report = nlohmann::json::parse(testing::read_text(dir / "cuda" / "report.json"));
  EXPECT_EQ(report["device"], "cuda");

  const auto a = read_predictions(dir / "cpu");
  const auto b = read_predictions(dir / "cuda");
  ASSERT_EQ(a.size(), b.size());
  ASSERT_GE(a.size(), 100u);
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].fields.size(), b[i].fields.size());
    EXPECT_EQ(a[i].fields[0], b[i].fields[0]);                 // row
    EXPECT_EQ(a[i].fields[2], b[i].fields[2]) << "row " << i;  // ok / error
    if (a[i].fields[2] != "ok") continue;
    // Columns 5.. are the class probabilities (6 decimals); the label is their argmax, so it may
    // only differ where two classes tie within rounding.
    double max_diff = 0, top = 0, second = 0;
    for (std::size_t c = 5; c + 1 < a[i].fields.size(); ++c) {
      const double p = std::stod(a[i].fields[c]);
      max_diff = std::max(max_diff, std::abs(p - std::stod(b[i].fields[c])));
      if (p > top) {
        second = top;
        top = p;
      } else {
        second = std::max(second, p);
      }
    }
    EXPECT_LE(max_diff, 1e-4) << "row " << i;
    if (top - second > 1e-4) {
      EXPECT_EQ(a[i].fields[3], b[i].fields[3]) << "row " << i;
    }
  }
}

}  // namespace
}  // namespace shoplens
