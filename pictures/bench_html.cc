#include "pictures/bench_html.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "pictures/plan_svg.h"

namespace memplan::formats {
namespace {

constexpr char kStatic[] = "static_plan";

constexpr char kCss[] = R"css(
body{margin:0;padding:12px 18px;font:13px/1.4 "DejaVu Sans",Helvetica,Arial,sans-serif;color:#222;background:#fff}
h1{font-size:20px;margin:0 0 2px}
h2{font-size:15px;margin:16px 0 4px}
#figures{margin:0 0 8px}
.small{display:inline-block;width:500px;margin:0 10px 8px 0;vertical-align:top;font-size:12px}
table{border-collapse:collapse;margin-top:6px}
th,td{padding:3px 10px;border-bottom:1px solid #ddd;text-align:right}
th:first-child,td:first-child{text-align:left}
.sw{display:inline-block;width:11px;height:11px;margin-right:5px;vertical-align:-1px}
)css";

// A line of a chart: a series of (x, bytes) points.
struct Trace {
  std::string name;   // shown on hover and in the legend
  std::string color;  // "#rrggbb"
  std::vector<std::pair<double, double>> points;
  bool filled = false;  // the area under it tinted
  double width = 2;     // stroke width
};

// A horizontal reference line: the plan's arena, the lower bound.
struct Level {
  double bytes = 0;
  std::string label;
  std::string color;
  std::string dash;  // stroke-dasharray, empty: solid
};

// One line chart: events across, bytes up.
struct LineChart {
  std::string id;
  int width = 1000, height = 380;
  double left = 80, right = 190, top = 16, bottom = 42;
  double x_max = 1;  // events
  double y_max = 1;  // bytes
  std::vector<Trace> traces;
  std::vector<Level> levels;
};

std::string Num(double v) { return absl::StrFormat("%.1f", v); }

// The colour of an allocator's row: the static plan always dark.
std::string RowColor(const v1::AllocatorFigures& row, int i) {
  return row.allocator() == kStatic ? "#333333" : PaletteColor(i);
}

// Grid, ticks and axis titles of a line chart.
std::string ChartAxes(const LineChart& c) {
  const double x0 = c.left, x1 = c.width - c.right, y0 = c.top,
               y1 = c.height - c.bottom;
  std::string out = absl::StrCat("<g font-size=\"11\" fill=\"#333\">");
  for (int64_t b : ByteTicks(static_cast<int64_t>(c.y_max), 6)) {
    const double y = y1 - b / c.y_max * (y1 - y0);
    absl::StrAppend(&out, "<line x1=\"", Num(x0), "\" x2=\"", Num(x1),
                    "\" y1=\"", Num(y), "\" y2=\"", Num(y),
                    "\" stroke=\"#e4e4e4\"/><text x=\"", Num(x0 - 6), "\" y=\"",
                    Num(y + 4), "\" text-anchor=\"end\">", HumanBytes(b),
                    "</text>");
  }
  for (int64_t e : StepTicks(0, static_cast<int64_t>(c.x_max), 8)) {
    const double x = x0 + e / c.x_max * (x1 - x0);
    absl::StrAppend(&out, "<text x=\"", Num(x), "\" y=\"", Num(y1 + 16),
                    "\" text-anchor=\"middle\">", GroupDigits(e), "</text>");
  }
  absl::StrAppend(
      &out, "<text x=\"", Num((x0 + x1) / 2), "\" y=\"", Num(y1 + 34),
      "\" text-anchor=\"middle\">trace event</text><rect x=\"", Num(x0),
      "\" y=\"", Num(y0), "\" width=\"", Num(x1 - x0), "\" height=\"",
      Num(y1 - y0), "\" fill=\"none\" stroke=\"#999\"/></g>\n");
  return out;
}

// A line chart as inline SVG: traces, reference levels labelled on the
// right, each trace's name on hover.
std::string LineChartSvg(const LineChart& c) {
  const double x0 = c.left, x1 = c.width - c.right, y0 = c.top,
               y1 = c.height - c.bottom;
  auto X = [&](double e) { return x0 + e / c.x_max * (x1 - x0); };
  auto Y = [&](double b) { return y1 - b / c.y_max * (y1 - y0); };
  std::string out =
      absl::StrCat("<svg id=\"", c.id, "\" class=\"chart\" ",
                   "xmlns=\"http://www.w3.org/2000/svg\" width=\"", c.width,
                   "\" height=\"", c.height, "\">\n", ChartAxes(c));
  for (const Trace& t : c.traces) {
    if (t.points.empty()) continue;
    std::string pts;
    for (const auto& [e, b] : t.points) {
      absl::StrAppend(&pts, pts.empty() ? "" : " ", Num(X(e)), ",", Num(Y(b)));
    }
    if (t.filled) {
      absl::StrAppend(&out, "<polygon points=\"", Num(X(t.points[0].first)),
                      ",", Num(y1), " ", pts, " ",
                      Num(X(t.points.back().first)), ",", Num(y1), "\" fill=\"",
                      t.color, "\" fill-opacity=\"0.3\"/>");
    }
    absl::StrAppend(&out, "<polyline class=\"trace\" data-name=\"",
                    EscapeXml(t.name), "\" points=\"", pts,
                    "\" fill=\"none\" stroke=\"", t.color, "\" stroke-width=\"",
                    t.width, "\"><title>", EscapeXml(t.name),
                    "</title></polyline>\n");
  }
  double last_label = -100;
  for (const Level& l : c.levels) {
    const double y = Y(l.bytes);
    const double label_y = std::max(y + 4, last_label + 14);
    last_label = label_y;
    absl::StrAppend(
        &out, "<line class=\"level\" x1=\"", Num(x0), "\" x2=\"", Num(x1 + 6),
        "\" y1=\"", Num(y), "\" y2=\"", Num(y), "\" stroke=\"", l.color,
        "\" stroke-width=\"2\"",
        l.dash.empty() ? "" : " stroke-dasharray=\"" + l.dash + "\"",
        "/><text x=\"", Num(x1 + 10), "\" y=\"", Num(label_y),
        "\" font-size=\"12\" fill=\"", l.color, "\">", EscapeXml(l.label),
        "</text>\n");
  }
  absl::StrAppend(&out, "</svg>\n");
  return out;
}

// The plan's arena and the lower bound as reference levels.
std::vector<Level> PlanLevels(const v1::BenchmarkResponse& r) {
  return {{static_cast<double>(r.arena_size_bytes()),
           absl::StrCat("static plan arena ", HumanBytes(r.arena_size_bytes())),
           "#000000", "7 4"},
          {static_cast<double>(r.lower_bound_bytes()),
           absl::StrCat("lower bound ", HumanBytes(r.lower_bound_bytes())),
           "#1f6fd1", "2 3"}};
}

// The largest byte figure of the page: every chart's top.
double TopBytes(const v1::BenchmarkResponse& r) {
  int64_t top =
      std::max<int64_t>({1, r.arena_size_bytes(), r.lower_bound_bytes()});
  for (const v1::AllocatorFigures& row : r.rows()) {
    top = std::max({top, row.peak_bytes_reserved(), row.peak_bytes_in_use()});
    for (const v1::SeriesPoint& p : row.series()) {
      top = std::max({top, p.bytes_reserved(), p.bytes_in_use()});
    }
  }
  return static_cast<double>(top) * 1.05;  // (near 2^63, in doubles)
}

double LastEvent(const v1::BenchmarkResponse& r) {
  int64_t last = std::max<int64_t>(1, r.trace_events());
  for (const v1::AllocatorFigures& row : r.rows()) {
    for (const v1::SeriesPoint& p : row.series()) {
      last = std::max(last, p.event());
    }
  }
  return static_cast<double>(last);
}

// One trace of a row's series: reserved or in use.
Trace SeriesTrace(const v1::AllocatorFigures& row, bool reserved,
                  std::string name, std::string color) {
  Trace t{std::move(name), std::move(color), {}, false, 2};
  for (const v1::SeriesPoint& p : row.series()) {
    t.points.push_back({static_cast<double>(p.event()),
                        static_cast<double>(reserved ? p.bytes_reserved()
                                                     : p.bytes_in_use())});
  }
  return t;
}

// Every allocator's bytes reserved over the replay on one chart.
std::string ReservedChart(const v1::BenchmarkResponse& r) {
  LineChart c;
  c.id = "reserved";
  c.x_max = LastEvent(r);
  c.y_max = TopBytes(r);
  c.levels = PlanLevels(r);
  std::string legend;
  for (int i = 0; i < r.rows_size(); ++i) {
    const v1::AllocatorFigures& row = r.rows(i);
    const std::string color = RowColor(row, i);
    c.traces.push_back(SeriesTrace(
        row, true, absl::StrCat(row.allocator(), " reserved"), color));
    absl::StrAppend(&legend, "<span class=\"sw\" style=\"background:", color,
                    "\"></span>", EscapeXml(row.allocator()),
                    row.series_size() == 0 ? " (no series)" : "", " &nbsp; ");
  }
  return absl::StrCat("<h2>Bytes reserved over the replay</h2>\n<div>", legend,
                      "</div>\n", LineChartSvg(c));
}

// One small chart per allocator: reserved (tinted) and in use.
std::string RowCharts(const v1::BenchmarkResponse& r) {
  std::string out =
      "<h2>Per allocator: bytes reserved (tinted) and in use (grey)</h2>\n";
  for (int i = 0; i < r.rows_size(); ++i) {
    const v1::AllocatorFigures& row = r.rows(i);
    LineChart c;
    c.id = absl::StrCat("row-", i);
    c.width = 500;
    c.height = 260;
    c.right = 140;
    c.x_max = LastEvent(r);
    c.y_max = TopBytes(r);
    c.levels = PlanLevels(r);
    c.levels[0].label = absl::StrCat("plan ", HumanBytes(r.arena_size_bytes()));
    c.traces.push_back(SeriesTrace(row, true,
                                   absl::StrCat(row.allocator(), " reserved"),
                                   RowColor(row, i)));
    c.traces.back().filled = true;
    c.traces.push_back(SeriesTrace(
        row, false, absl::StrCat(row.allocator(), " in use"), "#666666"));
    c.traces.back().width = 1.5;
    const double vs = r.arena_size_bytes() > 0
                          ? static_cast<double>(row.peak_bytes_reserved()) /
                                r.arena_size_bytes()
                          : 0;
    absl::StrAppend(&out, "<div class=\"small\"><b>",
                    EscapeXml(row.allocator()), "</b>: peak reserved ",
                    HumanBytes(row.peak_bytes_reserved()),
                    absl::StrFormat(" (%.2fx the plan)", vs), ", peak in use ",
                    HumanBytes(row.peak_bytes_in_use()),
                    row.series_size() == 0 ? " &middot; no series" : "",
                    "<br>\n", LineChartSvg(c), "</div>\n");
  }
  return out;
}

// Horizontal bars, one group per allocator: `values` per row, labelled.
struct BarChart {
  std::string id;
  std::vector<std::string> series;  // bar names within a group
  std::vector<std::string> colors;  // per bar of a group; empty: row colour
  std::vector<std::vector<double>> values;  // [row][bar]
  std::vector<std::vector<std::string>> labels;
  std::vector<Level> levels;
  bool log = false;  // a log10 scale from 1 (latencies span decades)
};

// "1 ns", "10 us", "1 ms": a power of ten of nanoseconds.
std::string NanosLabel(double ns) {
  if (ns >= 1e6) return absl::StrCat(ns / 1e6, " ms");
  if (ns >= 1e3) return absl::StrCat(ns / 1e3, " \xC2\xB5s");
  return absl::StrCat(ns, " ns");
}

std::string BarChartSvg(const v1::BenchmarkResponse& r, const BarChart& b) {
  const int bars = static_cast<int>(b.series.size());
  const double left = 120, right = 220, top = 22, bar_h = 16, gap = 12;
  const double width = 1000;
  const double height = top + r.rows_size() * (bars * bar_h + gap) + 10;
  double max = 1;
  for (const auto& row : b.values) {
    for (double v : row) max = std::max(max, v);
  }
  for (const Level& l : b.levels) max = std::max(max, l.bytes);
  const double span = b.log ? std::log10(max) * 1.05 + 0.2 : max * 1.05;
  auto X = [&](double v) {
    const double at = b.log ? std::log10(std::max(1.0, v)) : v;
    return left + at / span * (width - left - right);
  };
  std::string out = absl::StrCat(
      "<svg id=\"", b.id,
      "\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"", width,
      "\" height=\"", Num(height), "\" font-size=\"12\">\n");
  for (double decade = 1; b.log && decade <= max; decade *= 10) {
    absl::StrAppend(&out, "<line x1=\"", Num(X(decade)), "\" x2=\"",
                    Num(X(decade)), "\" y1=\"", Num(top - 4), "\" y2=\"",
                    Num(height - 8), "\" stroke=\"#e4e4e4\"/><text x=\"",
                    Num(X(decade)), "\" y=\"", Num(top - 8),
                    "\" text-anchor=\"middle\" font-size=\"11\" "
                    "fill=\"#555\">",
                    NanosLabel(decade), "</text>\n");
  }
  for (int i = 0; i < r.rows_size(); ++i) {
    const double gy = top + i * (bars * bar_h + gap);
    absl::StrAppend(&out, "<text x=\"", Num(left - 8), "\" y=\"",
                    Num(gy + bars * bar_h / 2 + 4), "\" text-anchor=\"end\">",
                    EscapeXml(r.rows(i).allocator()), "</text>");
    for (int k = 0; k < bars; ++k) {
      const double y = gy + k * bar_h;
      const std::string color =
          b.colors.empty() ? RowColor(r.rows(i), i) : b.colors[k];
      absl::StrAppend(
          &out, "<rect class=\"bar\" x=\"", Num(left), "\" y=\"", Num(y + 1),
          "\" width=\"", Num(X(b.values[i][k]) - left), "\" height=\"",
          Num(bar_h - 2), "\" fill=\"", color, "\"><title>",
          EscapeXml(absl::StrCat(r.rows(i).allocator(), " ", b.series[k], ": ",
                                 b.labels[i][k])),
          "</title></rect><text x=\"", Num(X(b.values[i][k]) + 5), "\" y=\"",
          Num(y + bar_h - 4), "\">", EscapeXml(b.labels[i][k]), "</text>\n");
    }
  }
  for (const Level& l : b.levels) {
    absl::StrAppend(
        &out, "<line class=\"level\" x1=\"", Num(X(l.bytes)), "\" x2=\"",
        Num(X(l.bytes)), "\" y1=\"", Num(top - 14), "\" y2=\"", Num(height - 6),
        "\" stroke=\"", l.color, "\" stroke-width=\"2\" stroke-dasharray=\"",
        l.dash, "\"/><text x=\"", Num(X(l.bytes) + 4), "\" y=\"", Num(top - 6),
        "\" fill=\"", l.color, "\">", EscapeXml(l.label), "</text>\n");
  }
  absl::StrAppend(&out, "</svg>\n");
  return out;
}

// Peak bytes reserved per allocator against the plan's arena.
std::string PeakChart(const v1::BenchmarkResponse& r) {
  BarChart b;
  b.id = "peaks";
  b.series = {"peak reserved"};
  for (const v1::AllocatorFigures& row : r.rows()) {
    const double vs = r.arena_size_bytes() > 0
                          ? static_cast<double>(row.peak_bytes_reserved()) /
                                r.arena_size_bytes()
                          : 0;
    b.values.push_back({static_cast<double>(row.peak_bytes_reserved())});
    b.labels.push_back({absl::StrCat(HumanBytes(row.peak_bytes_reserved()),
                                     absl::StrFormat(" (%.2fx)", vs))});
  }
  b.levels = {PlanLevels(r)[0]};
  return absl::StrCat("<h2>Peak bytes reserved against the static plan</h2>\n",
                      BarChartSvg(r, b));
}

// Latency per allocator operation, median and 99th percentile.
std::string LatencyChart(const v1::BenchmarkResponse& r) {
  BarChart b;
  b.id = "latency";
  b.series = {"p50", "p99"};
  b.colors = {"#4e79a7", "#e15759"};
  b.log = true;
  for (const v1::AllocatorFigures& row : r.rows()) {
    b.values.push_back(
        {static_cast<double>(row.p50_ns()), static_cast<double>(row.p99_ns())});
    // The static plan's arena hands out offsets: no call is timed.
    const bool timed = row.p50_ns() > 0 || row.p99_ns() > 0;
    b.labels.push_back(
        {timed ? absl::StrCat("p50 ", GroupDigits(row.p50_ns()), " ns")
               : "not timed",
         timed ? absl::StrCat("p99 ", GroupDigits(row.p99_ns()), " ns") : ""});
  }
  return absl::StrCat(
      "<h2>Latency per operation (log scale; <span class=\"sw\" "
      "style=\"background:#4e79a7\"></span>p50 <span class=\"sw\" "
      "style=\"background:#e15759\"></span>p99)</h2>\n",
      BarChartSvg(r, b));
}

// Every figure of the response, one row per allocator.
std::string FiguresTable(const v1::BenchmarkResponse& r) {
  std::string out =
      "<h2>Figures</h2>\n<table id=\"figures-table\"><tr><th>allocator</th>"
      "<th>peak in use</th><th>peak reserved</th><th>vs plan</th>"
      "<th>fragmentation</th><th>allocations</th><th>failures</th>"
      "<th>p50 ns</th><th>p99 ns</th></tr>\n";
  for (const v1::AllocatorFigures& row : r.rows()) {
    const double vs = r.arena_size_bytes() > 0
                          ? static_cast<double>(row.peak_bytes_reserved()) /
                                r.arena_size_bytes()
                          : 0;
    absl::StrAppend(&out, "<tr><td>", EscapeXml(row.allocator()), "</td><td>",
                    GroupDigits(row.peak_bytes_in_use()), "</td><td>",
                    GroupDigits(row.peak_bytes_reserved()), "</td><td>",
                    absl::StrFormat("%.2fx", vs), "</td><td>",
                    absl::StrFormat("%.3f", row.fragmentation_at_peak()),
                    "</td><td>", GroupDigits(row.allocations()), "</td><td>",
                    GroupDigits(row.failures()), "</td><td>",
                    GroupDigits(row.p50_ns()), "</td><td>",
                    GroupDigits(row.p99_ns()), "</td></tr>\n");
  }
  absl::StrAppend(&out, "</table>\n");
  return out;
}

}  // namespace

std::string BenchHtml(const v1::BenchmarkResponse& response,
                      absl::string_view title) {
  const std::string name = title.empty() ? "benchmark" : std::string(title);
  const std::string figures = absl::StrCat(
      GroupDigits(response.trace_events()),
      " trace events \xC2\xB7 static plan arena ",
      HumanBytes(response.arena_size_bytes()), " (",
      GroupDigits(response.arena_size_bytes()), " bytes; strategy ",
      response.strategy(), ", arena from ", response.arena_allocator(),
      ") \xC2\xB7 lower bound ", HumanBytes(response.lower_bound_bytes()));
  // The file name only: a page shared or committed shows no local path.
  const std::string file = name.substr(name.find_last_of('/') + 1);
  return absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<title>",
      EscapeXml(absl::StrCat("memplan bench: ", file)), "</title>\n<style>",
      kCss, "</style>\n</head>\n<body>\n<h1 id=\"title\">memplan bench: ",
      EscapeXml(file), "</h1>\n<p id=\"figures\">", EscapeXml(figures),
      "</p>\n", ReservedChart(response), RowCharts(response),
      PeakChart(response), LatencyChart(response), FiguresTable(response),
      "</body>\n</html>\n");
}

}  // namespace memplan::formats
