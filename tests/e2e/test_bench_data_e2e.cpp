#include <gtest/gtest.h>

#include <sstream>

#include <nlohmann/json.hpp>

#include "shoplens/data/csv.h"
#include "test_util.h"

namespace shoplens {
namespace {

TEST(E2eBenchData, RecordsEveryScenarioWithParametersInThreeFormats) {
  testing::ScratchDir dir("e2e-bench");
  ASSERT_EQ(testing::run_shoplens("make-data --out " + (dir / "cat").string() +
                                  " --num-images 48 --image-size-range 96:160 --seed 4")
                .exit_code,
            0);
  auto r = testing::run_shoplens(
      "bench-data --input " + (dir / "cat/manifest.csv").string() + " --out " + (dir / "bench").string() +
      " --threads 1 --set loader.batch_size=8 --set augment.image_size=64 --format json 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;

  std::set<std::string> scenarios;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    auto j = nlohmann::json::parse(line);
    scenarios.insert(j["scenario"].get<std::string>());
    EXPECT_GT(j["images_per_s"].get<double>(), 0.0) << line;
    EXPECT_FALSE(j["commit"].get<std::string>().empty());
    EXPECT_EQ(j["params"]["batch_size"], "8");
    EXPECT_EQ(j["params"]["image_size"], "64");
  }
  for (const char* s : {"prepare", "loader_shards", "pipeline_files", "torchvision_files"})
    EXPECT_TRUE(scenarios.count(s)) << "missing scenario " << s << " in " << r.output;

  auto csv = parse_csv(testing::read_text(dir / "bench/bench-data.csv"));
  ASSERT_EQ(csv.size(), 5u);  // header + 4 scenarios
  EXPECT_EQ(csv[0].fields[4], "scenario");
  EXPECT_NE(testing::read_text(dir / "bench/bench-data.md").find("shoplens / torchvision"), std::string::npos);
}

}  // namespace
}  // namespace shoplens
