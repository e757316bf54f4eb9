// `shoplens bench --against`: the rank statistics on fixed inputs with known answers (and against a
// brute-force enumeration of the permutation distribution), the verdict, the alternation of the
// two sides over a fake trial source, and the outputs. No timing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "shoplens/bench/bench_ab.h"
#include "shoplens/bench/bench_stats.h"
#include "shoplens/core/atomic_file.h"
#include "shoplens/core/errors.h"
#include "test_util.h"

namespace shoplens {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(BenchStats, DoubledMidranksShareTies) {
  EXPECT_EQ(doubled_midranks({3, 1, 3, 2}), (std::vector<int>{7, 2, 7, 4}));
}

TEST(BenchStats, SignedRankCountsOfThreeRanks) {
  // Subsets of {1, 2, 3}: sums 0, 1, 2, 3, 3, 4, 5, 6 (doubled: 0, 2, ... 12).
  const auto c = signed_rank_counts({2, 4, 6});
  ASSERT_EQ(c.size(), 13U);
  EXPECT_EQ(c[0], 1);
  EXPECT_EQ(c[6], 2);
  EXPECT_EQ(c[12], 1);
  EXPECT_EQ(c[1], 0);
}

TEST(BenchStats, RankSumCountsOfThreeFromSix) {
  // 20 ways to pick 3 of ranks 1..6; the smallest sum 6 = {1, 2, 3} in one way, 7 in one, 8 in two.
  const auto c = rank_sum_counts({2, 4, 6, 8, 10, 12}, 3);
  double total = 0;
  for (double x : c) total += x;
  EXPECT_EQ(total, 20);
  EXPECT_EQ(c[12], 1);
  EXPECT_EQ(c[14], 1);
  EXPECT_EQ(c[16], 2);
}

TEST(BenchStats, PairedAllPositiveEightPairs) {
  const auto e = paired_shift({1, 2, 3, 4, 5, 6, 7, 8});
  EXPECT_EQ(e.n, 8);
  EXPECT_DOUBLE_EQ(e.p_higher, 1.0 / 256);
  EXPECT_DOUBLE_EQ(e.p_lower, 1.0);
  EXPECT_DOUBLE_EQ(e.estimate, 4.5);
  // n = 8 at 95%: P(T+ <= 3) = 5/256 <= 0.025 < P(T+ <= 4), so the 4th smallest and largest Walsh averages.
  EXPECT_DOUBLE_EQ(e.low, 2.0);
  EXPECT_DOUBLE_EQ(e.high, 7.0);
}

TEST(BenchStats, PairedTooFewForTheIntervalIsUnbounded) {
  const auto e = paired_shift({-1, -2, -3, -4, -5});
  EXPECT_DOUBLE_EQ(e.p_lower, 1.0 / 32);
  EXPECT_TRUE(std::isinf(e.low) && e.low < 0);
  EXPECT_TRUE(std::isinf(e.high) && e.high > 0);
  EXPECT_DOUBLE_EQ(e.estimate, -3);
}

TEST(BenchStats, PairedZerosAreDroppedAndAllZeroIsNoTest) {
  EXPECT_EQ(paired_shift({0, 0, 0}).n, 0);
  EXPECT_DOUBLE_EQ(paired_shift({0, 0, 0}).p_lower, 1.0);
  EXPECT_EQ(paired_shift({0, 1, 2}).n, 2);
}

// P(T+ <= observed) by enumerating every sign assignment of the midranks.
double brute_p_lower(const std::vector<double>& d) {
  std::vector<double> mag;
  for (double x : d) mag.push_back(std::fabs(x));
  const auto r = doubled_midranks(mag);
  int observed = 0;
  for (std::size_t i = 0; i < d.size(); ++i)
    if (d[i] > 0) observed += r[i];
  int le = 0;
  const int total = 1 << d.size();
  for (int mask = 0; mask < total; ++mask) {
    int t = 0;
    for (std::size_t i = 0; i < d.size(); ++i)
      if (mask & (1 << i)) t += r[i];
    le += t <= observed ? 1 : 0;
  }
  return static_cast<double>(le) / total;
}

TEST(BenchStats, PairedPValueMatchesEnumerationWithTies) {
  const std::vector<double> d = {-0.05, 0.02, -0.03, -0.05, 0.01, -0.04, -0.02, -0.06, 0.03, -0.01};
  EXPECT_NEAR(paired_shift(d).p_lower, brute_p_lower(d), 1e-12);
  EXPECT_LT(paired_shift(d).p_lower, 0.05);
}

TEST(BenchStats, TwoSampleSeparatedThrees) {
  const auto e = two_sample_shift({1, 2, 3}, {4, 5, 6});
  EXPECT_DOUBLE_EQ(e.p_lower, 0.05);  // 1 of C(6,3) = 20 arrangements
  EXPECT_DOUBLE_EQ(e.p_higher, 1.0);
  EXPECT_DOUBLE_EQ(e.estimate, -3);
  EXPECT_TRUE(std::isinf(e.low));  // no 95% interval from 3 + 3
  const auto e80 = two_sample_shift({1, 2, 3}, {4, 5, 6}, 0.8);
  EXPECT_DOUBLE_EQ(e80.low, -4);  // P(U <= 1) = 2/20 <= 0.1: the 2nd smallest and largest differences
  EXPECT_DOUBLE_EQ(e80.high, -2);
}

TEST(BenchStats, IntervalRankOfAFlatDistribution) {
  EXPECT_EQ(interval_rank(std::vector<double>(100, 1.0), 0.9), 5);  // P(T <= 4) = 0.05
  EXPECT_EQ(interval_rank(std::vector<double>(10, 1.0), 0.9), 0);
}

// Rates whose ratio is `ratio` times a deterministic wobble common to both sides of a pair.
std::vector<double> rates(double ratio, int n, double wobble) {
  std::vector<double> out;
  for (int i = 0; i < n; ++i) out.push_back(100 * ratio * (1 + wobble * std::sin(i * 1.7)));
  return out;
}

TEST(BenchAbVerdict, PairedSlowdownBeyondTheLimitRegresses) {
  const auto base = rates(1, 8, 0.2);
  auto cand = base;
  for (std::size_t i = 0; i < cand.size(); ++i) cand[i] *= 0.95 * (1 + 0.01 * std::cos(i * 2.3));
  const auto v = judge_metric("images_per_second", true, cand, base, true, 0.02, 0.95);
  EXPECT_TRUE(v.compared);
  EXPECT_TRUE(v.significant);
  EXPECT_TRUE(v.regressed);
  EXPECT_NEAR(v.change, -0.05, 0.01);
  EXPECT_LT(v.change_low, v.change);
  EXPECT_GT(v.change_high, v.change);
  EXPECT_FALSE(judge_metric("images_per_second", true, cand, base, true, 0.10, 0.95).regressed);
}

TEST(BenchAbVerdict, NoiseWithoutShiftIsNotARegression) {
  const auto base = rates(1, 10, 0.2);
  std::vector<double> cand;
  for (std::size_t i = 0; i < base.size(); ++i) cand.push_back(base[i] * (i % 2 ? 1.03 : 0.97));
  const auto v = judge_metric("images_per_second", true, cand, base, true, 0.02, 0.95);
  EXPECT_FALSE(v.significant);
  EXPECT_FALSE(v.regressed);
  EXPECT_FALSE(v.improved);
}

TEST(BenchAbVerdict, FasterIsAnImprovementAndMoreMemoryARegression) {
  const auto base = rates(1, 8, 0.1);
  std::vector<double> cand;
  for (double b : base) cand.push_back(b * 1.2);
  EXPECT_TRUE(judge_metric("images_per_second", true, cand, base, true, 0.05, 0.95).improved);
  EXPECT_TRUE(judge_metric("peak_rss_bytes", false, cand, base, true, 0.05, 0.95).regressed);
  // Identical memory on both sides: compared, no shift, no verdict.
  const auto same = judge_metric("peak_rss_bytes", false, base, base, true, 0.05, 0.95);
  EXPECT_TRUE(same.compared);
  EXPECT_FALSE(same.regressed);
}

// A side whose trials are the given rates; records the order of every call in `log`.
class FakeSource : public AbTrialSource {
 public:
  FakeSource(std::string name, std::vector<double> rates, std::vector<std::string>& log, int fail_at = -1)
      : name_(std::move(name)), rates_(std::move(rates)), log_(log), fail_at_(fail_at) {}
  AbTrial run(const std::string& scenario, int index) override {
    log_.push_back(name_ + std::to_string(index));
    if (index == fail_at_) throw DataError("trial broke");
    AbTrial t;
    t.images_per_second = rates_[static_cast<std::size_t>(index) % rates_.size()];
    t.cpu_images_per_second = t.images_per_second * 2;
    t.peak_rss_bytes = 1000 + index;
    return t;
  }
  std::string describe() const override { return name_; }

 private:
  std::string name_;
  std::vector<double> rates_;
  std::vector<std::string>& log_;
  int fail_at_;
};

TEST(BenchAbRun, TrialsAlternateAndThePairsAreJudged) {
  std::vector<std::string> log;
  FakeSource cand("A", {90, 91, 92, 93, 94, 95}, log);
  FakeSource base("B", {100, 101, 102, 103, 104, 105}, log);
  BenchAbOptions o;
  o.max_regression = "2%";
  const auto r = run_ab_trials({"s1"}, 6, cand, &base, {}, o);
  EXPECT_EQ(log, (std::vector<std::string>{"A0", "B0", "B1", "A1", "A2", "B2", "B3", "A3", "A4", "B4", "B5", "A5"}));
  ASSERT_EQ(r.scenarios.size(), 1U);
  EXPECT_TRUE(r.scenarios[0].regressed());
  EXPECT_EQ(r.regressed(), 1);
  EXPECT_TRUE(r.failed_the_gate());
  EXPECT_TRUE(r.scenarios[0].median_gate.compared);
}

// Wall-clock slower by 10% (another process took the CPU), CPU time per image the same.
TEST(BenchAbVerdict, TimeMetricPicksTheGatedThroughput) {
  std::vector<AbTrial> cand(8), base(8);
  for (int i = 0; i < 8; ++i) {
    base[i].images_per_second = 100 + i;
    cand[i].images_per_second = (100 + i) * 0.9;
    base[i].cpu_images_per_second = cand[i].cpu_images_per_second = 200 + (i % 3);
  }
  BenchAbOptions o;
  const auto wall = judge_scenario("s", cand, base, true, o);
  EXPECT_TRUE(wall.regressed());
  EXPECT_EQ(wall.throughput()->metric, "images_per_second");
  EXPECT_TRUE(wall.median_gate.regressed);
  o.time_metric = "cpu";
  const auto cpu = judge_scenario("s", cand, base, true, o);
  EXPECT_FALSE(cpu.regressed());
  EXPECT_EQ(cpu.throughput()->metric, "images_per_cpu_second");
  EXPECT_TRUE(cpu.median_gate_cpu.compared);
  EXPECT_FALSE(cpu.median_gate_cpu.regressed);
}

TEST(BenchAbRun, AFailedTrialFailsTheScenarioOnly) {
  std::vector<std::string> log;
  FakeSource cand("A", {100}, log, 2);
  FakeSource base("B", {100}, log);
  BenchAbOptions o;
  o.fail_on = FailOn::kNever;
  const auto r = run_ab_trials({"s1"}, 6, cand, &base, {}, o);
  EXPECT_THAT(r.scenarios[0].error, HasSubstr("trial broke"));
  EXPECT_EQ(r.failed(), 1);
  EXPECT_TRUE(r.failed_the_gate());
}

TEST(BenchAbRun, StoredBaselineIsUnpairedAndWarnOnlyPasses) {
  std::vector<std::string> log;
  FakeSource cand("A", {80, 81, 82, 83, 84, 85}, log);
  const std::map<std::string, std::vector<AbTrial>> stored = {{"s1", {{100}, {101}, {102}, {103}, {104}, {105}}}};
  BenchAbOptions o;
  o.fail_on = FailOn::kNever;
  const auto r = run_ab_trials({"s1", "new"}, 6, cand, nullptr, stored, o);
  EXPECT_EQ(log.size(), 12U);  // only the candidate runs
  EXPECT_FALSE(r.scenarios[0].metrics[0].paired);
  EXPECT_TRUE(r.scenarios[0].regressed());
  EXPECT_FALSE(r.scenarios[1].metrics[0].compared);  // not in the stored run
  EXPECT_FALSE(r.failed_the_gate());                 // --fail-on never
  const std::string md = ab_markdown(r);
  EXPECT_THAT(md, HasSubstr("1 of 2 scenarios regressed"));
  EXPECT_THAT(md, HasSubstr("warning only"));
  EXPECT_LT(md.find("| s1 |"), md.find("| new |"));
  EXPECT_THAT(ab_junit(r, "suite"), Not(HasSubstr("<failure")));
}

TEST(BenchAbRun, MarkdownPutsRegressionsFirstAndJunitFailsThem) {
  std::vector<std::string> log;
  FakeSource cand("A", {100, 101, 99, 100, 102, 98}, log);
  FakeSource base("B", {100, 100, 100, 100, 100, 100}, log);
  BenchAbResult r;
  BenchAbOptions o;
  o.max_regression = "2%";
  r = run_ab_trials({"same"}, 6, cand, &base, {}, o);
  std::vector<std::string> log2;
  FakeSource slow("A", {80, 81, 82, 83, 84, 85}, log2);
  FakeSource base2("B", {100, 100, 101, 102, 100, 100}, log2);
  r.scenarios.push_back(run_ab_trials({"slow"}, 6, slow, &base2, {}, o).scenarios[0]);
  const std::string md = ab_markdown(r);
  EXPECT_LT(md.find("| slow |"), md.find("| same |"));
  EXPECT_THAT(md, HasSubstr("▼"));
  const auto junit = ab_junit(r, "suite");
  EXPECT_THAT(junit, HasSubstr("<failure"));
  EXPECT_EQ(ab_scenario_json(r.scenarios[1])["status"], "regressed");
  EXPECT_EQ(ab_scenario_json(r.scenarios[0])["status"], "ok");
}

TEST(BenchAbRun, StoredTrialsReadARecorderFile) {
  const testing::ScratchDir dir("ab");
  const auto file = dir / "stored_results.jsonl";
  write_file_atomic(file,
                    "{\"name\":\"s1\",\"images_per_second\":10,\"trial_images_per_second\":[9,10,11],"
                    "\"trial_images_per_cpu_second\":[20,21,22],\"peak_rss_bytes\":5000}\n");
  const auto t = stored_trials(file);
  ASSERT_EQ(t.at("s1").size(), 3U);
  EXPECT_EQ(t.at("s1")[2].images_per_second, 11);
  EXPECT_EQ(t.at("s1")[0].peak_rss_bytes, 5000);
  EXPECT_EQ(t.at("s1")[1].cpu_images_per_second, 21);
}

}  // namespace
}  // namespace shoplens
