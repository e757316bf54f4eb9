// The server's Prometheus text: per-stage quantiles, a cumulative batch-size histogram, counters,
// gauges, and the images/s window.
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "shoplens/serve/serve_metrics.h"

namespace shoplens::serve {
namespace {

using Clock = std::chrono::steady_clock;

// "name{labels} value" lines -> value, comments skipped.
std::map<std::string, double> samples(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto space = line.rfind(' ');
    out[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return out;
}

TEST(ServeMetrics, PrometheusTextHasStageQuantilesHistogramCountersAndGauges) {
  ServeMetrics m(8);
  for (int i = 1; i <= 100; ++i) m.observe(Stage::kTotal, i);  // 1..100 ms
  m.observe(Stage::kCompute, 4);
  const auto t = Clock::now();
  for (int size : {1, 1, 3, 8, 5}) m.observe_batch(size, t);
  m.count_response(200);
  m.count_response(200);
  m.count_response(503);
  m.count_rejected();
  m.count_timed_out();
  m.count_timed_out();
  m.set_queue_length_source([] { return std::size_t{7}; });
  m.set_ready(true);
  m.set_latency_curve({{1, 2.0}, {8, 9.5}});
  const std::string text = m.prometheus(t);
  const auto s = samples(text);

  EXPECT_NE(text.find("# TYPE shoplens_serve_latency_seconds summary"), std::string::npos);
  EXPECT_NEAR(s.at("shoplens_serve_latency_seconds{stage=\"total\",quantile=\"0.5\"}"), 0.0505, 1e-9);
  EXPECT_NEAR(s.at("shoplens_serve_latency_seconds{stage=\"total\",quantile=\"0.95\"}"), 0.09505, 1e-9);
  EXPECT_NEAR(s.at("shoplens_serve_latency_seconds{stage=\"total\",quantile=\"0.99\"}"), 0.09901, 1e-9);
  EXPECT_EQ(s.at("shoplens_serve_latency_seconds_count{stage=\"total\"}"), 100);
  EXPECT_NEAR(s.at("shoplens_serve_latency_seconds_sum{stage=\"total\"}"), 5.05, 1e-9);
  EXPECT_NEAR(s.at("shoplens_serve_latency_seconds{stage=\"compute\",quantile=\"0.5\"}"), 0.004, 1e-12);
  for (const char* stage : {"queue_wait", "preprocess", "host_to_device"})
    EXPECT_EQ(s.at(std::string("shoplens_serve_latency_seconds_count{stage=\"") + stage + "\"}"), 0);

  // Cumulative buckets at 1, 2, 4, 8 and +Inf.
  EXPECT_NE(text.find("# TYPE shoplens_serve_batch_size histogram"), std::string::npos);
  EXPECT_EQ(s.at("shoplens_serve_batch_size_bucket{le=\"1\"}"), 2);
  EXPECT_EQ(s.at("shoplens_serve_batch_size_bucket{le=\"2\"}"), 2);
  EXPECT_EQ(s.at("shoplens_serve_batch_size_bucket{le=\"4\"}"), 3);
  EXPECT_EQ(s.at("shoplens_serve_batch_size_bucket{le=\"8\"}"), 5);
  EXPECT_EQ(s.at("shoplens_serve_batch_size_bucket{le=\"+Inf\"}"), 5);
  EXPECT_EQ(s.at("shoplens_serve_batch_size_sum"), 18);
  EXPECT_EQ(s.at("shoplens_serve_batch_size_count"), 5);

  EXPECT_EQ(s.at("shoplens_serve_queue_length"), 7);
  EXPECT_EQ(s.at("shoplens_serve_requests_total{code=\"200\"}"), 2);
  EXPECT_EQ(s.at("shoplens_serve_requests_total{code=\"503\"}"), 1);
  EXPECT_EQ(s.at("shoplens_serve_rejected_total"), 1);
  EXPECT_EQ(s.at("shoplens_serve_timed_out_total"), 2);
  EXPECT_EQ(s.at("shoplens_serve_images_total"), 18);
  EXPECT_GT(s.at("shoplens_serve_images_per_second"), 0);
  EXPECT_EQ(s.at("shoplens_serve_ready"), 1);
  EXPECT_NEAR(s.at("shoplens_serve_model_p95_seconds{batch=\"8\"}"), 0.0095, 1e-12);
  // Every sample line belongs to a declared family.
  std::istringstream in(text);
  std::string line, family;
  while (std::getline(in, line)) {
    if (line.rfind("# TYPE ", 0) == 0) {
      family = line.substr(7, line.find(' ', 7) - 7);
    } else if (!line.empty() && line[0] != '#') {
      EXPECT_EQ(line.rfind(family, 0), 0u) << line;
    }
  }
}

TEST(ServeMetrics, ImagesPerSecondCountsTheRecentWindowOnly) {
  ServeMetrics m(4, /*rate_window_s=*/10.0);
  const auto start = Clock::now();
  m.observe_batch(4, start + std::chrono::seconds(1));
  m.observe_batch(4, start + std::chrono::seconds(20));
  m.observe_batch(2, start + std::chrono::seconds(25));
  // At 30 s the window is [20, 30]: 6 images over 10 s; the first batch has aged out.
  EXPECT_NEAR(m.images_per_second(start + std::chrono::seconds(30)), 0.6, 0.01);
  EXPECT_EQ(m.images(), 10u);
}

TEST(ServeMetrics, BatchesLargerThanTheLastBucketLandInInf) {
  ServeMetrics m(6);  // buckets 1, 2, 4, 6
  m.observe_batch(6, Clock::now());
  m.observe_batch(9, Clock::now());
  const auto s = samples(m.prometheus(Clock::now()));
  EXPECT_EQ(s.at("shoplens_serve_batch_size_bucket{le=\"4\"}"), 0);
  EXPECT_EQ(s.at("shoplens_serve_batch_size_bucket{le=\"6\"}"), 1);
  EXPECT_EQ(s.at("shoplens_serve_batch_size_bucket{le=\"+Inf\"}"), 2);
}

}  // namespace
}  // namespace shoplens::serve
