// Small SVG charts drawn as text, for the HTML report: a line chart (one line per series over
// categories, log-scaled y where asked) and a bar chart (stacked segments per category).
#pragma once

#include <string>
#include <vector>

namespace flexplan::whatif {

struct Series {
  std::string name;
  std::vector<double> values;  // one per category; NaN or <= 0 on a log axis: no point
};

struct Chart {
  std::string title;
  std::string y_label;
  std::vector<std::string> categories;  // the x axis
  std::vector<Series> series;
  bool log_y = false;
  int width = 720, height = 320;
};

// An <svg> element (no scripts, no external resources).
std::string line_chart_svg(const Chart&);
// Stacked bars: series are the segments, summed per category.
std::string bar_chart_svg(const Chart&);

// Text with &, <, >, " escaped for HTML and SVG.
std::string escape_html(const std::string&);

}  // namespace flexplan::whatif
