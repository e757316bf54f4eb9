// The micro-batcher's policy on a fake clock and a fake model: coalescing by size and by delay,
// immediate rejection of a full queue, timeouts, the p95-driven choice of batch and wait, and
// the drain. No thread, no sleep: run_once() is called at chosen instants.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include <numeric>

#include "shoplens/core/errors.h"
#include "shoplens/serve/micro_batcher.h"
#include "shoplens/serve/serve_metrics.h"

namespace shoplens::serve {
namespace {

struct FakeClock {
  TimePoint t = TimePoint{} + std::chrono::hours(1);
  void advance_ms(double ms) { t = plus_ms(t, ms); }
  NowFn fn() {
    return [this] { return t; };
  }
};

// Outputs {sum(input), batch size}; records the batch sizes it saw; reports `cost_ms(size)` as
// its compute time and, with a clock, lets that much time pass.
struct FakeModel {
  std::vector<int> batches;
  FakeClock* clock = nullptr;
  std::function<double(int)> cost_ms = [](int) { return 0.0; };
  bool fail = false;
  BatchFn fn() {
    return [this](const std::vector<const std::vector<float>*>& in, std::vector<std::vector<float>>& out) {
      if (fail) throw std::runtime_error("device lost");
      batches.push_back(static_cast<int>(in.size()));
      for (std::size_t i = 0; i < in.size(); ++i)
        out[i] = {std::accumulate(in[i]->begin(), in[i]->end(), 0.0f), static_cast<float>(in.size())};
      BatchTiming t;
      t.compute_ms = cost_ms(static_cast<int>(in.size()));
      if (clock != nullptr) clock->advance_ms(t.compute_ms);
      return t;
    };
  }
};

BatcherOptions fixed(int max_batch, double delay_ms, int max_queue = 100, double timeout_ms = 1000) {
  BatcherOptions o;
  o.max_batch = max_batch;
  o.max_queue_delay_ms = delay_ms;
  o.max_queue = max_queue;
  o.timeout_ms = timeout_ms;
  return o;
}

TEST(MicroBatcher, CoalescesUpToMaxBatchAndDispatchesAtOnceWhenFull) {
  FakeClock clock;
  FakeModel model;
  MicroBatcher b(fixed(4, 50), model.fn(), clock.fn());
  std::vector<std::shared_ptr<InferenceRequest>> reqs;
  for (int i = 0; i < 6; ++i) reqs.push_back(b.submit({static_cast<float>(i), 1.0f}));
  // Six queued, max batch 4: the first four go now, without waiting for the delay.
  EXPECT_EQ(b.run_once(), 4);
  EXPECT_EQ(b.queue_length(), 2u);
  // The remaining two are under the batch size and younger than the delay: they wait.
  EXPECT_EQ(b.run_once(), 0);
  ASSERT_EQ(model.batches, std::vector<int>({4}));
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(reqs[i]->status(), RequestStatus::kDone);
    EXPECT_FLOAT_EQ(reqs[i]->output[0], static_cast<float>(i) + 1.0f);  // each answer is its own input's
    EXPECT_EQ(reqs[i]->batch_size, 4);
  }
  EXPECT_EQ(reqs[4]->status(), RequestStatus::kPending);
}

TEST(MicroBatcher, DispatchesAPartialBatchWhenTheOldestHasWaitedTheDelay) {
  FakeClock clock;
  FakeModel model;
  MicroBatcher b(fixed(8, 10), model.fn(), clock.fn());
  auto first = b.submit({1.0f});
  clock.advance_ms(4);
  auto second = b.submit({2.0f});
  EXPECT_EQ(b.run_once(), 0);
  // The wake time is the oldest request's arrival plus the delay, not the newest's.
  EXPECT_NEAR(ms_between(clock.t, b.plan().wake), 6.0, 1e-6);
  clock.advance_ms(5.9);
  EXPECT_EQ(b.run_once(), 0);
  clock.advance_ms(0.1);
  EXPECT_EQ(b.run_once(), 2);
  EXPECT_EQ(first->status(), RequestStatus::kDone);
  EXPECT_NEAR(first->queue_wait_ms, 10.0, 1e-6);
  EXPECT_NEAR(second->queue_wait_ms, 6.0, 1e-6);
}

TEST(MicroBatcher, MaxBatchOneNeverCoalesces) {
  FakeClock clock;
  FakeModel model;
  MicroBatcher b(fixed(1, 10), model.fn(), clock.fn());
  for (int i = 0; i < 3; ++i) b.submit({1.0f});
  while (b.run_once() > 0) {}
  EXPECT_EQ(model.batches, std::vector<int>({1, 1, 1}));
}

TEST(MicroBatcher, RejectsAtOnceWhenTheQueueIsFull) {
  FakeClock clock;
  FakeModel model;
  ServeMetrics metrics(8);
  MicroBatcher b(fixed(8, 10, /*max_queue=*/2), model.fn(), clock.fn(), &metrics);
  auto a = b.submit({1.0f});
  auto c = b.submit({1.0f});
  auto rejected = b.submit({1.0f});
  // Answered on the spot (no wait needed), not queued to time out later.
  EXPECT_EQ(rejected->status(), RequestStatus::kRejected);
  EXPECT_NE(rejected->error.find("queue full"), std::string::npos);
  EXPECT_EQ(b.queue_length(), 2u);
  EXPECT_EQ(metrics.rejected(), 1u);
  clock.advance_ms(10);
  EXPECT_EQ(b.run_once(), 2);
  // Room again: the next one is accepted.
  EXPECT_EQ(b.submit({1.0f})->status(), RequestStatus::kPending);
}

TEST(MicroBatcher, DropsRequestsThatWaitedPastTheirTimeoutWithoutRunningThem) {
  FakeClock clock;
  FakeModel model;
  ServeMetrics metrics(8);
  MicroBatcher b(fixed(8, 100, 100, /*timeout_ms=*/50), model.fn(), clock.fn(), &metrics);
  auto old = b.submit({1.0f});
  clock.advance_ms(30);
  auto young = b.submit({2.0f});
  clock.advance_ms(25);  // old: 55 ms > 50; young: 25 ms
  EXPECT_EQ(b.run_once(), 0);
  EXPECT_EQ(old->status(), RequestStatus::kTimedOut);
  EXPECT_NE(old->error.find("timed out"), std::string::npos);
  EXPECT_EQ(young->status(), RequestStatus::kPending);
  EXPECT_TRUE(model.batches.empty());
  EXPECT_EQ(metrics.timed_out(), 1u);
}

TEST(MicroBatcher, AModelFailureFailsEveryRequestOfTheBatchAndTheBatcherGoesOn) {
  FakeClock clock;
  FakeModel model;
  MicroBatcher b(fixed(2, 0), model.fn(), clock.fn());
  auto a = b.submit({1.0f});
  auto c = b.submit({1.0f});
  model.fail = true;
  EXPECT_EQ(b.run_once(), 2);
  EXPECT_EQ(a->status(), RequestStatus::kFailed);
  EXPECT_NE(c->error.find("device lost"), std::string::npos);
  model.fail = false;
  auto d = b.submit({3.0f});
  EXPECT_EQ(b.run_once(), 1);
  EXPECT_EQ(d->status(), RequestStatus::kDone);
}

TEST(MicroBatcher, DrainAnswersEveryQueuedRequestWithoutWaitingForTheDelay) {
  FakeClock clock;
  FakeModel model;
  MicroBatcher b(fixed(4, 1000), model.fn(), clock.fn());
  std::vector<std::shared_ptr<InferenceRequest>> reqs;
  for (int i = 0; i < 6; ++i) reqs.push_back(b.submit({1.0f}));
  b.drain_and_stop();
  for (auto& r : reqs) EXPECT_EQ(r->status(), RequestStatus::kDone);
  EXPECT_EQ(model.batches, std::vector<int>({4, 2}));
  EXPECT_EQ(b.submit({1.0f})->status(), RequestStatus::kRejected);  // stopped: nothing new
}

TEST(MicroBatcher, WorkerThreadAnswersRequestsOnTheRealClock) {
  FakeModel model;
  MicroBatcher b(fixed(4, 1), model.fn());
  b.start();
  std::vector<std::shared_ptr<InferenceRequest>> reqs;
  for (int i = 0; i < 10; ++i) reqs.push_back(b.submit({static_cast<float>(i)}));
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(reqs[i]->wait_for(std::chrono::seconds(60)));
    EXPECT_EQ(reqs[i]->status(), RequestStatus::kDone);
    EXPECT_FLOAT_EQ(reqs[i]->output[0], static_cast<float>(i));
  }
  b.drain_and_stop();
}

TEST(LatencyCurve, InterpolatesBetweenMeasuredBatchesAndFindsTheLargestWithinABudget) {
  LatencyCurve c({{4, 28, 30}, {1, 14, 15}, {2, 19, 20}, {8, 45, 50}});
  EXPECT_DOUBLE_EQ(c.p95_ms(1), 15);
  EXPECT_DOUBLE_EQ(c.p95_ms(3), 25);
  EXPECT_DOUBLE_EQ(c.p95_ms(6), 40);
  EXPECT_DOUBLE_EQ(c.p95_ms(10), 60);  // along the last segment
  EXPECT_EQ(c.largest_within(40, 16), 6);
  EXPECT_EQ(c.largest_within(40, 4), 4);
  EXPECT_EQ(c.largest_within(5, 16), 1);  // nothing fits: batch 1 all the same
  // A stalled measurement (batch 2 slower than batch 4) is capped by the larger batch's.
  LatencyCurve stalled({{1, 11, 19}, {2, 1300, 1400}, {4, 25, 29}});
  EXPECT_DOUBLE_EQ(stalled.p95_ms(2), 29);
  EXPECT_DOUBLE_EQ(stalled.points()[1].p50_ms, 25);
  EXPECT_DOUBLE_EQ(stalled.p95_ms(1), 19);
}

TEST(LatencyCurve, MeasuringVisitsPowersOfTwoThenTheLargestBatchWithWarmUpPasses) {
  std::map<int, int> calls;
  std::vector<int> reported;
  const LatencyCurve curve = measure_latency_curve([&](int b) { ++calls[b]; }, 12, 3,
                                                   [&](const LatencyPoint& p) { reported.push_back(p.batch); });
  EXPECT_EQ(reported, (std::vector<int>{1, 2, 4, 8, 12}));
  for (int b : reported) EXPECT_EQ(calls[b], 2 + 3) << b;  // two untimed passes, then the timed ones
  EXPECT_EQ(curve.points().size(), 5u);
  // Stopped after the first point (a signal during warm-up): nothing more runs.
  calls.clear();
  const LatencyCurve stopped = measure_latency_curve([&](int b) { ++calls[b]; }, 12, 3, {}, [] { return true; });
  EXPECT_EQ(stopped.points().size(), 1u);
  EXPECT_EQ(calls.size(), 1u);
}

// A billion as the largest batch aborted serve (and made export grow past 2.5 GB): refused before
// anything runs.
TEST(LatencyCurve, MeasuringRefusesABatchOrPassesOutOfRange) {
  int runs = 0;
  const auto run = [&](int) { ++runs; };
  for (const auto& [batch, reps] : std::vector<std::pair<int, int>>{
           {0, 3}, {kMaxLatencyCurveBatch + 1, 3}, {1000000000, 3}, {4, 0}, {4, kMaxLatencyCurveReps + 1}})
    EXPECT_THAT([&] { measure_latency_curve(run, batch, reps); },
                ::testing::ThrowsMessage<UsageError>(::testing::HasSubstr("latency curve")))
        << batch << " " << reps;
  EXPECT_EQ(runs, 0);
  EXPECT_EQ(measure_latency_curve(run, kMaxLatencyCurveBatch, 1).points().back().batch, kMaxLatencyCurveBatch);
}

// The p95 mode on a curve of 10 + 5*b ms (b=1: 15 ms ... b=16: 90 ms) with a 100 ms target.
class P95Batcher : public ::testing::Test {
 protected:
  P95Batcher() {
    BatcherOptions o;
    o.max_batch = 32;
    o.max_queue = 1000;
    o.timeout_ms = 10000;
    o.p95_target_ms = 100;
    // The model costs what the curve says (10 + 5b ms); time passes only where a test says so.
    model_.cost_ms = [](int b) { return 10.0 + 5.0 * b; };
    batcher_ = std::make_unique<MicroBatcher>(o, model_.fn(), clock_.fn());
    batcher_->set_curve(
        LatencyCurve({{1, 15, 15}, {2, 20, 20}, {4, 30, 30}, {8, 50, 50}, {16, 90, 90}, {32, 170, 170}}));
  }
  // Arrivals `gap_ms` apart; returns what run_once dispatched after each.
  std::vector<int> arrive(int n, double gap_ms) {
    std::vector<int> dispatched;
    for (int i = 0; i < n; ++i) {
      clock_.advance_ms(gap_ms);
      requests_.push_back(batcher_->submit({1.0f}));
      dispatched.push_back(batcher_->run_once());
    }
    return dispatched;
  }
  FakeClock clock_;
  FakeModel model_;
  std::unique_ptr<MicroBatcher> batcher_;
  std::vector<std::shared_ptr<InferenceRequest>> requests_;
};

TEST_F(P95Batcher, LowLoadSendsEachRequestAloneAtOnce) {
  // 10/s: batch 1 (66/s) keeps up, waiting would only add latency.
  EXPECT_EQ(arrive(5, 100), std::vector<int>({1, 1, 1, 1, 1}));
  for (auto& r : requests_) EXPECT_DOUBLE_EQ(r->queue_wait_ms, 0);
}

TEST_F(P95Batcher, MediumLoadWaitsForTheBatchThatKeepsUpWithinTheBudget) {
  // 100/s: batch 2 gives 100/s, short of the 25% headroom; batch 4 (133/s) suffices. The first
  // request goes alone (no rate known yet), then batches of 4 form as requests arrive.
  EXPECT_EQ(arrive(13, 10), std::vector<int>({1, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 4}));
  // A lone request waits at most until its budget minus batch 4's latency (100 - 30 ms).
  clock_.advance_ms(10);
  batcher_->submit({1.0f});
  EXPECT_EQ(batcher_->run_once(), 0);
  EXPECT_EQ(batcher_->plan().target, 4);
  EXPECT_NEAR(ms_between(clock_.t, batcher_->plan().wake), 70.0, 1e-6);
  clock_.advance_ms(70);
  EXPECT_EQ(batcher_->run_once(), 1);  // by its budget at the latest, company or not
}

TEST_F(P95Batcher, HighLoadAimsAtTheLargestBatchThatFillsAndFinishesWithinTheTarget) {
  // 1000/s: no batch keeps up. Batch b fills in (b - 1) ms and runs 10 + 5b ms: 15 is the largest
  // with both within 100 ms (14 + 85), though --max-batch 32 and even the curve alone (18 at
  // 100 ms) would allow more: a batch that uses the whole budget to compute leaves none to fill.
  arrive(40, 1);
  EXPECT_EQ(batcher_->plan().target, 15);
  EXPECT_EQ(model_.batches, std::vector<int>({1, 15, 15}));
  for (auto& r : requests_) {
    if (r->status() == RequestStatus::kDone) {
      EXPECT_LE(r->queue_wait_ms, 15.0 + 1e-6);
    }
  }
}

TEST_F(P95Batcher, OverloadDrainsTheBacklogWithTheLargestBatchAllowed) {
  // 40 requests piled up (the worker was busy) and the oldest is past the 100 ms target: the
  // in-budget cap (18) would drain slowest; --max-batch 32 clears the backlog fastest.
  for (int i = 0; i < 40; ++i) {
    clock_.advance_ms(1);
    requests_.push_back(batcher_->submit({1.0f}));
  }
  clock_.advance_ms(100);
  EXPECT_EQ(batcher_->run_once(), 32);
  // 8 left: no longer more than an in-budget batch, back to the budget rule (all go: over budget).
  EXPECT_EQ(batcher_->run_once(), 8);
}

TEST_F(P95Batcher, KeepingUpIsJudgedOnTheMedianLatency) {
  // p50 well under p95 (a noisy machine): at 40/s batch 1's median (10 ms, 100/s) keeps up, so a
  // request goes alone at once even though its p95 (30 ms, 33/s) alone would say wait for company.
  batcher_->set_curve(LatencyCurve({{1, 10, 30}, {2, 14, 40}, {4, 22, 60}}));
  EXPECT_EQ(arrive(6, 25), std::vector<int>({1, 1, 1, 1, 1, 1}));
}

TEST_F(P95Batcher, PlansWithWhatBatchesReallyCostNotJustTheWarmUp) {
  // The model now takes twice the warm-up's time (a busier machine): the planner learns the factor
  // from the batches it runs, and under load aims at smaller batches than the warm-up curve alone
  // would allow (there 15 at 1000/s, HighLoad above; at twice the cost no more than 8 fit).
  model_.clock = &clock_;
  model_.cost_ms = [](int b) { return 2 * (10.0 + 5.0 * b); };
  for (int i = 0; i < 20; ++i) {
    clock_.advance_ms(1000);  // a slow trickle: each goes alone
    batcher_->submit({1.0f});
    ASSERT_EQ(batcher_->run_once(), 1);
  }
  EXPECT_NEAR(batcher_->latency_scale(), 2.0, 0.05);
  model_.clock = nullptr;
  model_.batches.clear();
  arrive(80, 1);  // the rate estimate climbs from the trickle's to ~1000/s
  EXPECT_GE(batcher_->plan().target, 2);
  EXPECT_LE(batcher_->plan().target, 8);
  for (std::size_t i = 40; i < model_.batches.size(); ++i) EXPECT_LE(model_.batches[i], 8) << i;
}

}  // namespace
}  // namespace shoplens::serve
