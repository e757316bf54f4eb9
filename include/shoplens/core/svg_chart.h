// Small self-contained charts as inline SVG (no scripts, fonts or images), for the HTML reports:
// labelled axes with rounded ("nice") ticks, an optional log2 axis for batch sizes, whole-number
// ticks for epochs, data kept a few pixels inside the axes (no point on an axis line), and a
// legend beside the plot so it never covers data (the chart grows taller for a long legend).
// Elements carry classes (x-axis, y-axis, x-label, y-label, tick, series with its data-name,
// legend) so tests (tests/e2e/html_layout_check.js) and style sheets can find them.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace shoplens {

struct ChartSeries {
  std::string name;
  std::string color;
  std::vector<std::pair<double, double>> points;  // non-finite points are skipped
  bool line = true;                               // false: markers only
  bool dashed = false;
  std::vector<std::string> notes;  // optional, per point: a tooltip (e.g. the rows behind it)
};

struct ChartAxis {
  std::string label;
  bool log2 = false;       // ticks at powers of two; points at x <= 0 are skipped
  bool from_zero = false;  // the range includes 0 (amounts: memory, images/s)
  bool integer = false;    // ticks at whole numbers only (epochs)
};

std::string svg_chart(const std::string& title, const ChartAxis& x, const ChartAxis& y,
                      const std::vector<ChartSeries>& series);

// Ticks at 1, 2 or 5 x 10^k steps covering [lo, hi] (about `target` of them), first <= lo and
// last >= hi, each a round number (no 0.30000000000000004); steps of at least `min_step`.
std::vector<double> nice_ticks(double lo, double hi, int target = 5, double min_step = 0);
// Powers of two from the largest <= lo to the smallest >= hi (lo > 0).
std::vector<double> log2_ticks(double lo, double hi);
// A tick's text: as many decimals as the step needs, no more.
std::string format_tick(double value, double step);

}  // namespace shoplens
