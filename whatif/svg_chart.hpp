// Small SVG charts drawn as text, for the HTML report: a line chart (one line per series over
// categories, log-scaled y where asked) and a bar chart (stacked segments per category). Axes
// carry round ticks (1, 2, 5 x 10^k), every series is named in a legend below the plot, and
// the SVG scales down with the page (viewBox), so a chart reads at 700 px.
#pragma once

#include <string>
#include <vector>

namespace flexplan::whatif {

struct Series {
  std::string name;
  std::vector<double> values;  // one per category; NaN or <= 0 on a log axis: no point (a gap)
};

struct Chart {
  std::string title;
  std::string y_label;
  std::vector<std::string> categories;  // the x axis
  std::vector<Series> series;
  bool log_y = false;
  int width = 720, plot_height = 220;
};

// An <svg> element (no scripts, no external resources).
std::string line_chart_svg(const Chart&);
// Stacked bars: series are the segments, summed per category.
std::string bar_chart_svg(const Chart&);

// Round tick values covering [low, high]: on a linear axis steps of 1, 2 or 5 x 10^k from a
// multiple of the step at or below low to one at or above high (about five ticks); on a log
// axis the powers of ten from the one at or below low to the one at or above high, with 2 and
// 5 x 10^k between them where the range spans at most two decades.
std::vector<double> round_ticks(double low, double high, bool log);
// A tick's label: "0.5", "20", "1000", "2e+05" (shortest exact form).
std::string tick_label(double value);

// Text with &, <, >, " escaped for HTML and SVG.
std::string escape_html(const std::string&);

}  // namespace flexplan::whatif
