// Per-trial GPU telemetry (clocks, power, temperature, throttle reasons) summarised from fake NVML
// samples, and a throttled trial flagged in every output: JSON lines, CSV, Markdown, JUnit, the
// A/B verdict and the history.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "shoplens/bench/bench_ab.h"
#include "shoplens/bench/bench_history.h"
#include "shoplens/bench/bench_results.h"

namespace shoplens {
namespace {

using ::testing::HasSubstr;

GpuSample sample(double t, double sm, double power, double temp, std::uint64_t reasons) {
  GpuSample s;
  s.t = t;
  s.sm_clock_mhz = sm;
  s.memory_clock_mhz = 2600;
  s.power_watts = power;
  s.temperature_c = temp;
  s.throttle_reasons = reasons;
  return s;
}

TEST(BenchGpuTelemetry, TrialSummaryTakesTheWindowsSamples) {
  const std::vector<GpuSample> samples = {sample(0.05, 1980, 300, 60, 0x1), sample(0.15, 1755, 700, 83, 0x4),
                                          sample(0.25, 1900, 500, 70, 0), sample(0.35, 1000, 100, 99, 0x40)};
  const TrialGpu g = summarise_trial_gpu(samples, 0.1, 0.3);
  EXPECT_EQ(g.samples, 2);
  EXPECT_EQ(g.sm_clock_mhz_min, 1755);
  EXPECT_EQ(g.memory_clock_mhz_min, 2600);
  EXPECT_EQ(g.power_watts_mean, 600);
  EXPECT_EQ(g.temperature_c_max, 83);
  EXPECT_EQ(g.throttle_reasons, 0x4U);
  EXPECT_TRUE(g.throttled());
  EXPECT_FALSE(summarise_trial_gpu(samples, 0, 0.1).throttled());  // idle is not throttling
  EXPECT_EQ(summarise_trial_gpu(samples, 5, 6).samples, 0);
}

TEST(BenchGpuTelemetry, ReasonNames) {
  EXPECT_EQ(throttle_reason_names(0), "");
  EXPECT_EQ(throttle_reason_names(0x4 | 0x40), "sw_power_cap,hw_thermal_slowdown");
}

ScenarioResult throttled_result() {
  ScenarioResult r;
  r.scenario.name = "gpu_scenario";
  r.scenario.device = DeviceChoice::kCuda;
  r.batch = 8;
  r.trial_images_per_second = {100, 90};
  r.trial_seconds = {1, 1};
  r.trial_data_wait_seconds = {0, 0};
  r.step_seconds = {0.1, 0.1};
  TrialGpu cool, hot;
  cool.samples = hot.samples = 3;
  hot.throttle_reasons = 0x20;
  r.trial_gpu = {cool, hot};
  return r;
}

TEST(BenchGpuTelemetry, AThrottledTrialIsFlaggedInEveryRecorderOutput) {
  const ScenarioResult r = throttled_result();
  EXPECT_EQ(r.throttled_trials(), 1);
  BenchEnvironment env;
  const auto j = result_to_json(r, env, "test");
  EXPECT_EQ(j["throttled_trials"], 1);
  EXPECT_EQ(j["trial_gpu"][1]["throttle_reasons"], "sw_thermal_slowdown");
  EXPECT_EQ(j["trial_gpu"][1]["throttled"], true);
  const std::string csv = results_csv({r}, env);
  EXPECT_THAT(csv, HasSubstr(",throttled_trials\n"));
  EXPECT_EQ(csv.substr(csv.size() - 3), ",1\n");
  EXPECT_THAT(results_markdown({r}, env, {}), HasSubstr("GPU throttled in 1 of 2 trials"));
  EXPECT_THAT(results_junit({r}, {}, "s"), HasSubstr("GPU throttled in 1 of 2 trials"));
  const auto h = history_run_json(history_run({r}, env, "2026-11-29T00:00:00Z"));
  EXPECT_EQ(h["scenarios"][0]["throttled_trials"], 1);
}

TEST(BenchGpuTelemetry, AThrottledTrialIsFlaggedInTheAbVerdict) {
  std::vector<AbTrial> c(6), b(6);
  for (int i = 0; i < 6; ++i) c[i].images_per_second = b[i].images_per_second = 100 + i;
  c[4].throttled = true;
  const AbScenarioVerdict v = judge_scenario("s", c, b, true, BenchAbOptions{});
  EXPECT_EQ(v.throttled_candidate, std::vector<int>{4});
  EXPECT_EQ(ab_scenario_json(v)["throttled_trials"]["candidate"][0], 4);
  BenchAbResult r;
  r.scenarios = {v};
  EXPECT_THAT(ab_markdown(r), HasSubstr("GPU throttled in 1 trial"));
}

}  // namespace
}  // namespace shoplens
