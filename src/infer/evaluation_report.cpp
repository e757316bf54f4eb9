// The evaluation page (evaluation.h: evaluation_report_html): plain HTML and inline SVG, so it
// opens anywhere, offline, and can be attached to a review as one file.
#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "shoplens/core/strings.h"
#include "shoplens/infer/evaluation.h"

namespace shoplens {
using json = nlohmann::json;

namespace {

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

// Rows are true classes, columns predictions; a cell's shade is its share of the row.
std::string confusion_heat_map(const json& m) {
  const auto& names = m["classes"];
  std::string out = "<table class=\"cm\"><tr><th>true \\ predicted</th>";
  for (const auto& n : names) out += "<th>" + xml_escape(n.get<std::string>()) + "</th>";
  out += "</tr>\n";
  for (std::size_t t = 0; t < names.size(); ++t) {
    const auto& row = m["confusion"][t];
    std::int64_t total = 0;
    for (const auto& v : row) total += v.get<std::int64_t>();
    out += "<tr><th>" + xml_escape(names[t].get<std::string>()) + "</th>";
    for (std::size_t p = 0; p < row.size(); ++p) {
      const std::int64_t v = row[p].get<std::int64_t>();
      const double share = total ? static_cast<double>(v) / total : 0.0;
      const char* hue = t == p ? "33,113,181" : "203,24,29";  // blue on the diagonal, red off it
      out += fmt::format("<td style=\"background:rgba({},{:.3f})\" title=\"{:.1f}% of the row\">{}</td>", hue, share,
                         share * 100, v);
    }
    out += "</tr>\n";
  }
  return out + "</table>\n";
}

// Accuracy per confidence bin against the diagonal of perfect calibration.
std::string reliability_svg(const json& m) {
  const int w = 320, h = 320;
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "role=\"img\" aria-label=\"reliability\">",
      w + 60, h + 40, w + 60, h + 40);
  out += fmt::format(
      "<g transform=\"translate(50,5)\"><rect width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#888\"/>"
      "<line x1=\"0\" y1=\"{}\" x2=\"{}\" y2=\"0\" stroke=\"#aaa\" stroke-dasharray=\"4\"/>",
      w, h, h, w);
  const auto& bins = m["calibration_bins"];
  const double bw = static_cast<double>(w) / std::max<std::size_t>(1, bins.size());
  for (std::size_t b = 0; b < bins.size(); ++b) {
    if (bins[b]["count"].get<std::int64_t>() == 0) continue;
    const double acc = bins[b]["accuracy"].get<double>();
    out += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#2171b5\" "
        "opacity=\"0.8\"><title>{} rows, accuracy {:.3f}, confidence {:.3f}</title></rect>",
        b * bw + 1, h * (1 - acc), bw - 2, h * acc, bins[b]["count"].get<std::int64_t>(), acc,
        bins[b]["mean_confidence"].get<double>());
  }
  for (int i = 0; i <= 4; ++i) {  // ticks at 0, 0.25, ..., 1 on both axes
    const double v = i / 4.0;
    out += fmt::format("<text class=\"tick\" x=\"{:.1f}\" y=\"{}\" font-size=\"9\" text-anchor=\"middle\">{:g}</text>",
                       v * w, h + 11, v);
    out += fmt::format("<text class=\"tick\" x=\"-3\" y=\"{:.1f}\" font-size=\"9\" text-anchor=\"end\">{:g}</text>",
                       h * (1 - v) + 3, v);
  }
  out += fmt::format(
      "<text class=\"x-label\" x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">confidence "
      "(mean per bin)</text>",
      w / 2, h + 26);
  out += fmt::format(
      "<text class=\"y-label\" x=\"-24\" y=\"{0}\" font-size=\"11\" text-anchor=\"middle\" "
      "transform=\"rotate(-90 -24 {0})\">accuracy</text>",
      h / 2);
  return out + "</g></svg>\n";
}

}  // namespace

std::string evaluation_report_html(const json& m, const std::string& title) {
  std::string out =
      "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>" + xml_escape(title) +
      "</title>\n<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
      "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f4f4f4}"
      "table.cm td{min-width:2.5em;text-align:center}</style></head><body>\n";
  out += "<h1>" + xml_escape(title) + "</h1>\n" + headline(m);
  out += "<h2>Confusion matrix</h2>\n" + confusion_heat_map(m);
  out += "<h2>Per class</h2>\n" + per_class_table(m);
  out += "<h2>Reliability (accuracy per confidence bin; dashed: perfect calibration)</h2>\n" + reliability_svg(m);
  return out + "</body></html>\n";
}

}  // namespace shoplens
