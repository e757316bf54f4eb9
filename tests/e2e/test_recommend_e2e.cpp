// End-to-end: `shoplens recommend` over the shipped bench reference and price table, and its
// exit codes for malformed inputs and impossible constraints.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace shoplens {
namespace {

using testing::run_shoplens;

std::string shipped(const std::string& file) { return testing::source_dir() + "/configs/" + file; }

TEST(E2eRecommend, PlansTheShippedScenarioWithAPickAFallbackAndEstimatesMarked) {
  auto r = run_shoplens(
      "recommend --bench " + shipped("bench_reference.jsonl") + " --prices " + shipped("prices.json") +
      " --scenario resnet50_finetune --dataset-size 1200000 --epochs 10 --deadline 8h --budget 250 --format json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto plan = nlohmann::json::parse(r.output.substr(r.output.find('{')));
  ASSERT_TRUE(plan["recommended"].is_string());
  ASSERT_TRUE(plan["fallback"].is_string());
  EXPECT_NE(plan["recommended"], plan["fallback"]);
  int pareto = 0, estimates = 0;
  for (const auto& o : plan["options"]) {
    pareto += o["pareto"].get<bool>();
    estimates += o["estimate"].get<bool>();
    // time x price = cost, for every row
    EXPECT_NEAR(o["hours"].get<double>() * o["price_per_hour"].get<double>(), o["cost"].get<double>(), 1e-9);
    if (o["kind"] == "tpu") {
      EXPECT_NE(plan["recommended"], o["offer"]);
    }
  }
  EXPECT_GE(pareto, 1);
  EXPECT_EQ(estimates, static_cast<int>(plan["options"].size()));  // the shipped figures are all published ones

  auto table = run_shoplens("recommend --bench " + shipped("bench_reference.jsonl") + " --prices " +
                            shipped("prices.json") + " --scenario resnet50_finetune --epochs 10");
  ASSERT_EQ(table.exit_code, 0) << table.output;
  EXPECT_NE(table.output.find("RECOMMENDED"), std::string::npos) << table.output;
  EXPECT_NE(table.output.find("how each throughput was obtained"), std::string::npos) << table.output;

  auto old_spelling = run_shoplens("recommend --bench " + shipped("bench_reference.jsonl") + " --prices " +
                                   shipped("prices.json") + " --scenario resnet50_finetune --epochs 10 --json");
  ASSERT_EQ(old_spelling.exit_code, 0) << old_spelling.output;
  EXPECT_NE(old_spelling.output.find("--json is deprecated: use --format json"), std::string::npos)
      << old_spelling.output;
  EXPECT_NE(old_spelling.output.find("\"recommended\""), std::string::npos) << old_spelling.output;
}

// The default price table is the shipped one, found beside the program from any folder (it was
// "configs/prices.json" relative to the working directory, so only the checkout's root worked).
TEST(E2eRecommend, TheDefaultPriceTableIsFoundFromAnyWorkingFolder) {
  testing::ScratchDir dir("e2e-recommend-cwd");
  auto r = testing::run_shell("cd " + dir.path().string() + " && " + testing::shoplens_bin() + " recommend --bench " +
                              shipped("bench_reference.jsonl") + " --scenario resnet50_finetune --epochs 10 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto plan = nlohmann::json::parse(r.output.substr(r.output.find('{')));
  EXPECT_TRUE(plan["recommended"].is_string()) << r.output;
}

TEST(E2eRecommend, BadInputsAndImpossibleConstraintsFailClearly) {
  testing::ScratchDir dir("e2e-recommend");
  const auto bench = dir / "bench.jsonl";
  testing::write_text(bench,
                      "{\"scenario\": \"s\", \"device\": \"gpu\", \"hardware\": \"A100-40GB\", "
                      "\"images_per_second\": 1000, \"source\": \"x\", \"date\": \"2026-11\"}\n{broken\n");
  auto malformed =
      run_shoplens("recommend --bench " + bench.string() + " --prices " + shipped("prices.json") + " --scenario s");
  EXPECT_EQ(malformed.exit_code, 1) << malformed.output;
  EXPECT_NE(malformed.output.find("bench.jsonl:2: not valid JSON"), std::string::npos) << malformed.output;

  testing::write_text(bench,
                      "{\"scenario\": \"s\", \"device\": \"gpu\", \"hardware\": \"A100-40GB\", "
                      "\"images_per_second\": 1000, \"source\": \"x\", \"date\": \"2026-11\"}\n");
  auto impossible = run_shoplens("recommend --bench " + bench.string() + " --prices " + shipped("prices.json") +
                                 " --scenario s --dataset-size 1200000 --epochs 100 --deadline 10m --budget 1");
  EXPECT_EQ(impossible.exit_code, 1) << impossible.output;
  EXPECT_NE(impossible.output.find("nothing meets the deadline of 10 min and the budget of 1.00"), std::string::npos)
      << impossible.output;

  testing::write_text(dir / "prices.json",
                      R"({"offers": [{"name": "a", "provider": "p", "kind": "gpu", "accelerator": "A100-40GB",
                          "accelerators": 1, "on_demand_per_hour": 3, "date": "2026-11"}]})");
  auto no_source = run_shoplens("recommend --bench " + bench.string() + " --prices " + (dir / "prices.json").string() +
                                " --scenario s");
  EXPECT_EQ(no_source.exit_code, 2) << no_source.output;
  EXPECT_NE(no_source.output.find("offers[0] ('a'): missing \"source\""), std::string::npos) << no_source.output;

  auto bad_deadline = run_shoplens("recommend --bench " + bench.string() + " --scenario s --deadline soon");
  EXPECT_EQ(bad_deadline.exit_code, 2) << bad_deadline.output;
}

}  // namespace
}  // namespace shoplens
