// core/svg_chart.h: rounded ticks, log2 batch axes, visible single points, legend beside the plot.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <string>
#include <vector>

#include "shoplens/core/svg_chart.h"
#include "test_util.h"

namespace shoplens {
namespace {

std::vector<std::string> tick_texts(const std::string& svg) {
  std::vector<std::string> out;
  const std::regex tick("class=\"tick\"[^>]*>([^<]*)<");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), tick); it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1]);
  return out;
}

TEST(SvgChart, TicksAreRoundNumbersCoveringTheData) {
  const auto unit = nice_ticks(0, 1, 5);
  ASSERT_EQ(unit.size(), 6u);
  EXPECT_NEAR(unit[3], 0.6, 1e-12);
  const auto t = nice_ticks(0.137, 0.589, 5);
  EXPECT_LE(t.front(), 0.137);
  EXPECT_GE(t.back(), 0.589);
  EXPECT_DOUBLE_EQ(t[1] - t[0], 0.1);
  EXPECT_EQ(format_tick(0.30000000000000004, 0.1), "0.3");
  EXPECT_EQ(format_tick(-1e-17, 0.1), "0.0");
  EXPECT_EQ(format_tick(1500, 500), "1500");
  EXPECT_EQ(format_tick(0.025, 0.005), "0.025");
  // Every tick label of a chart over awkward values is short.
  const std::string svg = svg_chart("t", {"x"}, {"y"}, {{"s", "#000", {{0.1234567, 1.987654}, {7.654321, 3.14159}}}});
  for (const auto& text : tick_texts(svg)) EXPECT_LE(text.size(), 4u) << text;
}

TEST(SvgChart, ABatchAxisIsLog2WithPowerOfTwoTicks) {
  EXPECT_EQ(log2_ticks(3, 100), (std::vector<double>{2, 4, 8, 16, 32, 64, 128}));
  EXPECT_EQ(log2_ticks(32, 32), (std::vector<double>{32, 64}));
  const std::string svg = svg_chart("t", {"batch", true}, {"MiB"}, {{"s", "#000", {{4, 1}, {512, 2}, {0, 3}}, false}});
  EXPECT_NE(svg.find("batch (log2 scale)"), std::string::npos);
  const auto ticks = tick_texts(svg);
  EXPECT_NE(std::find(ticks.begin(), ticks.end(), "512"), ticks.end());
  // The point at batch 0 cannot sit on a log axis: two markers, not three.
  EXPECT_EQ(testing::occurrences(svg, "<circle"), 2u);
}

TEST(SvgChart, ALoneLinePointIsDrawnAsAFullMarkerAndLegendsSitBesideThePlot) {
  const std::string svg = svg_chart("loss", {"epoch"}, {"loss"}, {{"one record", "#c33", {{1, 2.5}}}});
  EXPECT_NE(svg.find("r=\"3.5\""), std::string::npos) << svg;
  EXPECT_EQ(svg.find("<polyline"), std::string::npos);
  // Legend x is right of every plotted x (the plot area ends before the legend column).
  const std::regex legend("class=\"legend\"><rect x=\"([0-9.]+)\"");
  const std::regex circle("<circle cx=\"([0-9.]+)\"");
  std::smatch lm, cm;
  ASSERT_TRUE(std::regex_search(svg, lm, legend));
  ASSERT_TRUE(std::regex_search(svg, cm, circle));
  EXPECT_GT(std::stod(lm[1]), std::stod(cm[1]));
  EXPECT_NE(svg.find("class=\"x-label\""), std::string::npos);
  EXPECT_NE(svg.find("class=\"y-label\""), std::string::npos);
}

}  // namespace
}  // namespace shoplens
