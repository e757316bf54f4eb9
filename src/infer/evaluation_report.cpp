// The evaluation page (evaluation.h: evaluation_report_html): plain HTML and inline SVG, so it
// opens anywhere, offline, and can be attached to a review as one file.
#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "shoplens/core/strings.h"
#include "shoplens/core/svg_chart.h"
#include "shoplens/infer/evaluation.h"

namespace shoplens {
using json = nlohmann::json;

namespace {

// The page fits its window: charts scale down in a narrow one, the confusion matrix takes the
// width it is given (confusion_heat_map) and its cells never spill over (overflow hidden).
constexpr const char* kStyle =
    "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
    "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f4f4f4}"
    "svg{max-width:100%;height:auto}figure{margin:1em 0}"
    "table.cm{table-layout:fixed;font-size:0.85em;margin:0}table.cm col.row-names{width:13em}"
    "table.cm td,table.cm th{padding:2px 3px;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}"
    "table.cm td{text-align:center}table.cm th.true{text-align:left}table.cm th.corner{white-space:normal;"
    "text-align:left;vertical-align:bottom}table.cm th.predicted{vertical-align:bottom;text-align:center}"
    "table.cm th.predicted span{display:inline-block;writing-mode:vertical-rl;transform:rotate(180deg);"
    "max-height:13em;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}"
    ".color-legend{font-size:0.9em;margin-top:0.5em}.color-legend "
    ".key{display:inline-block;margin-right:1.5em;white-space:nowrap}"
    ".color-legend .ramp{display:inline-block;width:7em;height:0.9em;vertical-align:middle;border:1px solid #ccc}";

std::string headline(const json& m) {
  return fmt::format(
      "<table class=\"kv\"><tr><th>samples</th><td>{}</td></tr><tr><th>accuracy</th><td>{:.4f}</td></tr>"
      "<tr><th>top-{}</th><td>{:.4f}</td></tr><tr><th>macro-F1</th><td>{:.4f}</td></tr>"
      "<tr><th>weighted-F1</th><td>{:.4f}</td></tr><tr><th>NLL</th><td>{:.4f}</td></tr>"
      "<tr><th>ECE ({} bins)</th><td>{:.4f}</td></tr><tr><th>unreadable / unlabelled / unknown label</th>"
      "<td>{} / {} / {}</td></tr></table>\n",
      m["samples"].get<std::int64_t>(), m["accuracy"].get<double>(), m["top_k"].get<int>(),
      m["top5_accuracy"].get<double>(), m["macro_f1"].get<double>(), m["weighted_f1"].get<double>(),
      m["nll"].get<double>(), m["calibration_bins"].size(), m["ece"].get<double>(),
      m["rows"]["unreadable"].get<std::int64_t>(), m["rows"]["unlabelled"].get<std::int64_t>(),
      m["rows"]["unknown_label"].get<std::int64_t>());
}

std::string per_class_table(const json& m) {
  std::string out =
      "<table><tr><th>class</th><th>precision</th><th>recall</th><th>F1</th><th>support</th>"
      "<th>predicted</th></tr>\n";
  for (const auto& c : m["per_class"])
    out +=
        fmt::format("<tr><td>{}</td><td>{:.4f}</td><td>{:.4f}</td><td>{:.4f}</td><td>{}</td><td>{}</td></tr>\n",
                    xml_escape(c["name"].get<std::string>()), c["precision"].get<double>(), c["recall"].get<double>(),
                    c["f1"].get<double>(), c["support"].get<std::int64_t>(), c["predicted"].get<std::int64_t>());
  return out + "</table>\n";
}

// Cell colours: blue on the diagonal (predicted right), red off it (confused); the alpha is the
// cell's share of its row.
constexpr const char* kRightRgb = "33,113,181";
constexpr const char* kConfusedRgb = "203,24,29";

std::string shaded_cell(std::int64_t count, double share, bool diagonal) {
  // White digits on the darker shades, where black ones would be hard to read.
  return fmt::format("<td style=\"background:rgba({},{:.3f}){}\" title=\"{:.1f}% of the row\">{}</td>",
                     diagonal ? kRightRgb : kConfusedRgb, share, share > 0.55 ? ";color:#fff" : "", share * 100, count);
}

// The key to the heat map's colours, beside it.
std::string colour_legend() {
  auto ramp = [](const char* rgb, const char* meaning) {
    return fmt::format(
        "<span class=\"key\">0% <span class=\"ramp\" style=\"background:linear-gradient(to right,rgba({0},0),"
        "rgba({0},1))\"></span> 100% {1}</span> ",
        rgb, meaning);
  };
  return std::string(
             "<figcaption class=\"color-legend\"><span class=\"key\">Shade: the cell's share of its true class's "
             "rows.</span> ") +
         ramp(kRightRgb, "predicted right (diagonal)") + ramp(kConfusedRgb, "confused with another class") +
         "</figcaption>\n";
}

// Rows are true classes, columns predictions. The table never takes more than the page's width,
// whatever the class count: its columns share the width (table-layout: fixed), the predicted
// classes' names are written upwards and long names are cut with an ellipsis (each whole in its
// cell's title), so a dozen classes or more fit a 1280 px window without horizontal scroll.
std::string confusion_heat_map(const json& m) {
  const auto& names = m["classes"];
  std::string out = fmt::format(
      "<figure class=\"heatmap\"><table class=\"cm\" style=\"width:min(100%,{}em)\">\n<colgroup>"
      "<col class=\"row-names\"/></colgroup>\n<tr><th class=\"corner\">true \\ predicted</th>",
      14 + 4 * names.size());
  for (const auto& n : names) {
    const std::string name = xml_escape(n.get<std::string>());
    out += "<th class=\"predicted\" title=\"" + name + "\"><span>" + name + "</span></th>";
  }
  out += "</tr>\n";
  for (std::size_t t = 0; t < names.size(); ++t) {
    const auto& row = m["confusion"][t];
    std::int64_t total = 0;
    for (const auto& v : row) total += v.get<std::int64_t>();
    const std::string name = xml_escape(names[t].get<std::string>());
    out += "<tr><th class=\"true\" title=\"" + name + "\">" + name + "</th>";
    for (std::size_t p = 0; p < row.size(); ++p) {
      const std::int64_t v = row[p].get<std::int64_t>();
      out += shaded_cell(v, total ? static_cast<double>(v) / total : 0.0, t == p);
    }
    out += "</tr>\n";
  }
  return out + "</table>\n" + colour_legend() + "</figure>\n";
}

// Accuracy per confidence bin (at the bin's mean confidence) against the diagonal of perfect
// calibration; each point's tooltip has the bin's rows.
std::string reliability_svg(const json& m) {
  ChartSeries bins{"accuracy per bin", "#2171b5", {}, true};
  for (const auto& bin : m["calibration_bins"]) {
    const std::int64_t count = bin["count"].get<std::int64_t>();
    if (count == 0) continue;
    const double accuracy = bin["accuracy"].get<double>(), confidence = bin["mean_confidence"].get<double>();
    bins.points.emplace_back(confidence, accuracy);
    bins.notes.push_back(fmt::format("{} rows, accuracy {:.3f}, confidence {:.3f}", count, accuracy, confidence));
  }
  const ChartSeries perfect{"perfect calibration", "#999", {{0, 0}, {1, 1}}, true, true};
  return svg_chart("reliability", {"confidence (mean per bin)", false, true}, {"accuracy", false, true},
                   {perfect, bins});
}

}  // namespace

std::string evaluation_report_html(const json& m, const std::string& title) {
  std::string out = "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>" + xml_escape(title) +
                    "</title>\n<style>" + std::string(kStyle) + "</style></head><body>\n";
  out += "<h1>" + xml_escape(title) + "</h1>\n" + headline(m);
  out += "<h2>Confusion matrix</h2>\n" + confusion_heat_map(m);
  out += "<h2>Per class</h2>\n" + per_class_table(m);
  out += "<h2>Reliability</h2>\n" + reliability_svg(m);
  return out + "</body></html>\n";
}

}  // namespace shoplens
