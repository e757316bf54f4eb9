#include "shoplens/core/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include <fmt/format.h>

#include "shoplens/core/strings.h"

namespace shoplens {
namespace {

// Geometry: plot area on the left, legend column on the right (outside the data). A chart grows
// taller than kMinHeight when its legend needs the rows.
constexpr double kWidth = 600, kMinHeight = 290, kLeft = 64, kPlotRight = 420, kTop = 30, kBottom = 46;
constexpr double kLegendX = kPlotRight + 14, kLegendRow = 16;
// Data keep this far inside the axes: a point at an axis's first tick would otherwise sit on the axis line.
constexpr double kInset = 8;
constexpr int kTickFontPx = 11;

struct Range {
  double lo = 0, hi = 1;
  std::vector<double> ticks;
  double step = 1;  // tick step (linear axes)
};

bool usable(const std::pair<double, double>& p, bool x_log2) {
  return std::isfinite(p.first) && std::isfinite(p.second) && (!x_log2 || p.first > 0);
}

std::vector<std::pair<double, double>> usable_points(const ChartSeries& s, bool x_log2) {
  std::vector<std::pair<double, double>> out;
  for (const auto& p : s.points)
    if (usable(p, x_log2)) out.push_back(p);
  return out;
}

Range axis_range(std::vector<double> values, const ChartAxis& axis) {
  Range r;
  if (axis.from_zero) values.push_back(0);
  if (values.empty()) values = {0, 1};
  double lo = *std::min_element(values.begin(), values.end()), hi = *std::max_element(values.begin(), values.end());
  if (axis.log2) {
    r.ticks = log2_ticks(lo, hi);
  } else {
    const double pad = axis.integer ? 1 : 0.5;  // one value alone: a range around it
    if (hi - lo < 1e-12) lo -= pad, hi += pad;
    r.ticks = nice_ticks(lo, hi, 5, axis.integer ? 1 : 0);
    r.step = r.ticks.size() > 1 ? r.ticks[1] - r.ticks[0] : 1;
  }
  r.lo = r.ticks.front();
  r.hi = r.ticks.back();
  return r;
}

class Plot {
 public:
  Plot(Range x, Range y, bool x_log2, double height)
      : x_(std::move(x)), y_(std::move(y)), x_log2_(x_log2), height_(height) {}
  double px(double v) const {
    const double a = x_log2_ ? std::log2(x_.lo) : x_.lo, b = x_log2_ ? std::log2(x_.hi) : x_.hi;
    const double t = ((x_log2_ ? std::log2(v) : v) - a) / (b - a);
    return kLeft + kInset + t * (kPlotRight - kLeft - 2 * kInset);
  }
  double py(double v) const { return base() - kInset - (v - y_.lo) / (y_.hi - y_.lo) * (base() - kTop - 2 * kInset); }
  double base() const { return height_ - kBottom; }  // the x axis's line
  double height() const { return height_; }
  const Range& x() const { return x_; }
  const Range& y() const { return y_; }
  bool x_log2() const { return x_log2_; }

 private:
  Range x_, y_;
  bool x_log2_;
  double height_;
};

void write_axes(std::ostringstream& os, const Plot& plot, const ChartAxis& x, const ChartAxis& y) {
  const double base = plot.base();
  os << fmt::format("<line class=\"axis x-axis\" x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#333\"/>\n",
                    kLeft, base, kPlotRight);
  os << fmt::format("<line class=\"axis y-axis\" x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#333\"/>\n",
                    kLeft, kTop, base);
  for (double t : plot.x().ticks)
    os << fmt::format("<text class=\"tick\" x=\"{:.1f}\" y=\"{}\" font-size=\"{}\" text-anchor=\"middle\">{}</text>\n",
                      plot.px(t), base + 15, kTickFontPx,
                      plot.x_log2() ? fmt::format("{:.0f}", t) : format_tick(t, plot.x().step));
  for (double t : plot.y().ticks) {
    os << fmt::format("<text class=\"tick\" x=\"{}\" y=\"{:.1f}\" font-size=\"{}\" text-anchor=\"end\">{}</text>\n",
                      kLeft - 4, plot.py(t) + 4, kTickFontPx, format_tick(t, plot.y().step));
    os << fmt::format("<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/>\n", kLeft,
                      plot.py(t), kPlotRight);
  }
  const std::string x_label = x.label + (x.log2 ? " (log2 scale)" : "");
  os << fmt::format("<text class=\"x-label\" x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\">{}</text>\n",
                    (kLeft + kPlotRight) / 2, plot.height() - 10, xml_escape(x_label));
  os << fmt::format(
      "<text class=\"y-label\" x=\"14\" y=\"{0}\" font-size=\"12\" text-anchor=\"middle\" "
      "transform=\"rotate(-90 14 {0})\">{1}</text>\n",
      (kTop + base) / 2, xml_escape(y.label));
}

// A series is one group (its name in data-name), so a check can count what each series drew.
void write_series(std::ostringstream& os, const Plot& plot, const ChartSeries& s, bool x_log2, int index) {
  const auto pts = usable_points(s, x_log2);
  os << "<g class=\"series\" data-name=\"" << xml_escape(s.name) << "\">\n";
  if (s.line && pts.size() > 1) {
    os << "<polyline fill=\"none\" stroke=\"" << s.color << "\" stroke-width=\"1.8\""
       << (s.dashed ? " stroke-dasharray=\"5 3\"" : "") << " points=\"";
    for (const auto& [x, y] : pts) os << fmt::format("{:.1f},{:.1f} ", plot.px(x), plot.py(y));
    os << "\"/>\n";
  }
  // A lone point of a line series gets a full-size marker: a one-record run is still visible.
  const double radius = s.line && pts.size() > 1 ? 2.2 : 3.5;
  for (std::size_t i = 0; i < s.points.size(); ++i) {
    if (!usable(s.points[i], x_log2)) continue;
    os << fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\">", plot.px(s.points[i].first),
                      plot.py(s.points[i].second), radius, s.color);
    if (i < s.notes.size()) os << "<title>" << xml_escape(s.notes[i]) << "</title>";
    os << "</circle>\n";
  }
  os << "</g>\n";
  const double ly = kTop + 4 + index * kLegendRow;
  os << fmt::format("<g class=\"legend\"><rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/>", kLegendX,
                    ly, s.color);
  os << fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"10\">{}</text></g>\n", kLegendX + 14, ly + 9,
                    xml_escape(s.name));
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int target, double min_step) {
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / std::max(1, target);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude * 10;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * magnitude >= raw) {
      step = m * magnitude;
      break;
    }
  step = std::max(step, min_step);
  std::vector<double> ticks;
  const auto first = static_cast<long long>(std::floor(lo / step + 1e-9));
  const auto last = static_cast<long long>(std::ceil(hi / step - 1e-9));
  for (long long k = first; k <= last; ++k) ticks.push_back(static_cast<double>(k) * step);
  return ticks;
}

std::vector<double> log2_ticks(double lo, double hi) {
  std::vector<double> ticks;
  const int first = static_cast<int>(std::floor(std::log2(std::max(lo, 1e-300)) + 1e-9));
  const int last = std::max(first + 1, static_cast<int>(std::ceil(std::log2(std::max(hi, lo)) - 1e-9)));
  for (int e = first; e <= last; ++e) ticks.push_back(std::ldexp(1.0, e));
  return ticks;
}

std::string format_tick(double value, double step) {
  const int decimals = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
  if (std::fabs(value) < std::fabs(step) * 1e-6) value = 0;  // no "-0" from k x step rounding
  return fmt::format("{:.{}f}", value, decimals);
}

std::string svg_chart(const std::string& title, const ChartAxis& x, const ChartAxis& y,
                      const std::vector<ChartSeries>& series) {
  std::vector<double> xs, ys;
  for (const auto& s : series)
    for (const auto& [px, py] : usable_points(s, x.log2)) xs.push_back(px), ys.push_back(py);
  const double height = std::max(kMinHeight, kTop + 4 + static_cast<double>(series.size()) * kLegendRow + 8);
  const Plot plot(axis_range(xs, x), axis_range(ys, y), x.log2, height);
  std::ostringstream os;
  os << fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "role=\"img\" aria-label=\"{2}\">\n",
      kWidth, height, xml_escape(title));
  os << fmt::format("<text class=\"title\" x=\"{}\" y=\"18\" font-size=\"14\" text-anchor=\"middle\">{}</text>\n",
                    (kLeft + kPlotRight) / 2, xml_escape(title));
  write_axes(os, plot, x, y);
  for (std::size_t i = 0; i < series.size(); ++i) write_series(os, plot, series[i], x.log2, static_cast<int>(i));
  os << "</svg>\n";
  return os.str();
}

}  // namespace shoplens
