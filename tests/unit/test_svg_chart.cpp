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

std::vector<double> attribute_values(const std::string& svg, const std::string& element, const std::string& attribute) {
  std::vector<double> out;
  const std::regex re("<" + element + "[^>]* " + attribute + "=\"([-0-9.]+)\"");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator(); ++it)
    out.push_back(std::stod((*it)[1]));
  return out;
}

TEST(SvgChart, AnEpochAxisHasWholeNumberTicksOnly) {
  // Two epochs: plain rounded ticks would be 1.0, 1.2, ..., 2.0.
  const std::string svg =
      svg_chart("f1", {"epoch", false, false, true}, {"F1"}, {{"run", "#000", {{1, 0.41}, {2, 0.52}}}});
  const std::regex x_tick("<text class=\"tick\"[^>]*text-anchor=\"middle\">([^<]*)<");
  int x_ticks = 0;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), x_tick); it != std::sregex_iterator(); ++it, ++x_ticks)
    EXPECT_TRUE(std::regex_match((*it)[1].str(), std::regex("[0-9]+"))) << (*it)[1];
  EXPECT_GE(x_ticks, 2);
  // One epoch alone still gets whole-number ticks around it.
  const std::string one = svg_chart("f1", {"epoch", false, false, true}, {"F1"}, {{"run", "#000", {{1, 0.41}}}});
  for (auto it = std::sregex_iterator(one.begin(), one.end(), x_tick); it != std::sregex_iterator(); ++it)
    EXPECT_TRUE(std::regex_match((*it)[1].str(), std::regex("[0-9]+"))) << (*it)[1];
}

TEST(SvgChart, NoPointSitsOnAnAxis) {
  // The smallest x and y of the data are the axes' first ticks: without padding their points sit on the axes.
  const std::string svg = svg_chart("t", {"epoch", false, false, true}, {"loss", false, true},
                                    {{"a", "#000", {{1, 0}, {2, 1.5}, {3, 0.7}}}, {"b", "#c33", {{1, 2}}, false}});
  const auto y_axis = attribute_values(svg, "line class=\"axis y-axis\"", "x1");
  const auto x_axis = attribute_values(svg, "line class=\"axis x-axis\"", "y1");
  ASSERT_EQ(y_axis.size(), 1u) << svg;
  ASSERT_EQ(x_axis.size(), 1u) << svg;
  const auto cx = attribute_values(svg, "circle", "cx"), cy = attribute_values(svg, "circle", "cy");
  const auto r = attribute_values(svg, "circle", "r");
  ASSERT_EQ(cx.size(), 4u);
  for (std::size_t i = 0; i < cx.size(); ++i) {
    EXPECT_GT(cx[i] - r[i], y_axis[0]) << "point " << i;
    EXPECT_LT(cy[i] + r[i], x_axis[0]) << "point " << i;
  }
}

TEST(SvgChart, EverySeriesIsAGroupAndTheLegendFitsHowEverLong) {
  std::vector<ChartSeries> many;
  for (int i = 0; i < 14; ++i) many.push_back({"run " + std::to_string(i), "#000", {{1, i}, {2, i + 1}}});
  const std::string svg = svg_chart("t", {"epoch", false, false, true}, {"loss"}, many);
  EXPECT_EQ(testing::occurrences(svg, "<g class=\"series\""), many.size());
  EXPECT_NE(svg.find("data-name=\"run 13\""), std::string::npos);
  const auto height = attribute_values(svg, "svg", "height");
  ASSERT_EQ(height.size(), 1u);
  for (double y : attribute_values(svg, "g class=\"legend\"><rect", "y")) EXPECT_LE(y + 10, height[0]);
}

}  // namespace
}  // namespace shoplens
