// SVG line and bar charts (svg_chart.hpp).
#include "whatif/svg_chart.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/core.h>

namespace flexplan::whatif {
namespace {

constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
// Margins: the title and the top tick keep apart; the rotated category labels fit below.
constexpr int kLeft = 64, kRight = 16, kTop = 40, kLabels = 70;
constexpr double kCharWidth = 6.2;  // about, at font-size 11
constexpr size_t kLabelChars = 20;  // longer category labels are cut (the full text is a tooltip)
constexpr int kLegendRow = 16;

// Series past the tenth colour are drawn dashed (the legend shows them dashed too).
std::string dash(size_t series) { return series >= 10 ? " stroke-dasharray=\"5 3\"" : ""; }

struct Frame {
  const Chart& chart;
  double low = 0, high = 1;
  double plot_w() const { return chart.width - kLeft - kRight; }
  double plot_h() const { return chart.plot_height; }
  double map(double v) const {
    const double a = chart.log_y ? std::log10(v) : v, lo = chart.log_y ? std::log10(low) : low,
                 hi = chart.log_y ? std::log10(high) : high;
    return kTop + plot_h() * (1 - (a - lo) / (hi > lo ? hi - lo : 1));
  }
  double x_at(size_t i, size_t count) const {
    return kLeft + plot_w() * (count <= 1 ? 0.5 : static_cast<double>(i) / static_cast<double>(count - 1));
  }
};

// The legend's entries, flowed into rows across the chart's width: (x, row) per series.
std::vector<std::pair<double, int>> legend_layout(const Chart& c, int* rows) {
  std::vector<std::pair<double, int>> at;
  double x = kLeft;
  int row = 0;
  for (const auto& s : c.series) {
    const double w = 18 + kCharWidth * static_cast<double>(s.name.size()) + 14;
    if (x > kLeft && x + w > c.width - kRight) x = kLeft, ++row;
    at.emplace_back(x, row);
    x += w;
  }
  *rows = c.series.empty() ? 0 : row + 1;
  return at;
}

int total_height(const Chart& c) {
  int rows = 0;
  legend_layout(c, &rows);
  return kTop + c.plot_height + kLabels + rows * kLegendRow + 6;
}

std::string frame_svg(const Frame& f) {
  const Chart& c = f.chart;
  const int height = total_height(c);
  // width 100% of the container at most, scaled as a picture: the page never scrolls sideways.
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {0} {1}\" width=\"{0}\" height=\"{1}\" "
      "style=\"max-width:100%;height:auto\" font-family=\"sans-serif\" font-size=\"11\" role=\"img\">\n"
      "<title>{3}</title>\n<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"16\" font-size=\"13\" font-weight=\"bold\">{3}</text>\n",
      c.width, height, kLeft, escape_html(c.title));
  out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#888\"/>\n",
                     kLeft, kTop, f.plot_w(), f.plot_h());
  for (double v : round_ticks(f.low, f.high, c.log_y)) {
    const double y = f.map(v);
    out += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e4e4e4\"/>"
                       "<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n",
                       kLeft, kLeft + f.plot_w(), y, y, kLeft - 4, y + 4, tick_label(v));
  }
  out += fmt::format("<text x=\"12\" y=\"{0}\" transform=\"rotate(-90 12 {0})\" text-anchor=\"middle\">{1}</text>\n",
                     kTop + f.plot_h() / 2, escape_html(c.y_label));
  return out;
}

std::string legend_svg(const Chart& c) {
  int rows = 0;
  const auto at = legend_layout(c, &rows);
  const int top = kTop + c.plot_height + kLabels;
  std::string out;
  for (size_t s = 0; s < c.series.size(); ++s) {
    const double x = at[s].first, y = top + kLegendRow * at[s].second;
    out += s < 10 ? fmt::format("<rect x=\"{:.1f}\" y=\"{}\" width=\"12\" height=\"10\" fill=\"{}\"/>", x, y,
                                kColors[s % 10])
                  : fmt::format("<line x1=\"{0:.1f}\" x2=\"{1:.1f}\" y1=\"{2}\" y2=\"{2}\" stroke=\"{3}\" "
                                "stroke-width=\"2\"{4}/>", x, x + 12, y + 5, kColors[s % 10], dash(s));
    out += fmt::format("<text x=\"{:.1f}\" y=\"{}\">{}</text>\n", x + 16, y + 9, escape_html(c.series[s].name));
  }
  return out;
}

std::string x_labels_svg(const Frame& f, bool bars) {
  const Chart& c = f.chart;
  std::string out;
  const size_t n = c.categories.size();
  const size_t every = std::max<size_t>(1, (n + 11) / 12);  // at most about a dozen labels
  for (size_t i = 0; i < n; i += every) {
    const double x = bars ? kLeft + f.plot_w() * (static_cast<double>(i) + 0.5) / static_cast<double>(n)
                          : f.x_at(i, n);
    const double y = kTop + f.plot_h() + 14;
    std::string label = c.categories[i];
    if (label.size() > kLabelChars) label = label.substr(0, kLabelChars - 1) + "\u2026";
    out += fmt::format("<text x=\"{0:.1f}\" y=\"{1:.1f}\" text-anchor=\"end\" transform=\"rotate(-30 {0:.1f} {1:.1f})\">"
                       "<title>{2}</title>{3}</text>\n",
                       x, y, escape_html(c.categories[i]), escape_html(label));
  }
  return out;
}

bool usable(double v, bool log) { return std::isfinite(v) && (!log || v > 0); }

}  // namespace

std::vector<double> round_ticks(double low, double high, bool log) {
  std::vector<double> ticks;
  if (!(high > low)) return {low};
  if (log) {
    const int first = static_cast<int>(std::floor(std::log10(low) + 1e-9));
    int last = static_cast<int>(std::ceil(std::log10(high) - 1e-9));
    if (last == first) ++last;
    const bool fine = last - first <= 2;
    const int stride = std::max(1, (last - first + 5) / 6);  // at most about six decades labelled
    last = first + (last - first + stride - 1) / stride * stride;  // the top is a labelled decade
    for (int k = first; k <= last; ++k) {
      const double decade = std::pow(10.0, k);
      if ((k - first) % stride == 0) ticks.push_back(decade);
      if (fine && k < last)
        for (double m : {2.0, 5.0})
          if (m * decade >= low * (1 - 1e-9) && m * decade <= high * (1 + 1e-9)) ticks.push_back(m * decade);
    }
    std::sort(ticks.begin(), ticks.end());
    return ticks;
  }
  const double raw = (high - low) / 5;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * magnitude >= raw) {
      step = m * magnitude;
      break;
    }
  const double start = std::floor(low / step + 1e-9) * step;
  for (double v = start; v <= high + step * 1e-6; v += step)
    ticks.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
  if (ticks.back() < high * (1 - 1e-12)) ticks.push_back(ticks.back() + step);
  return ticks;
}

std::string tick_label(double value) {
  // Rounded to 12 digits first, so that sums of steps (0.1 + 0.2) print as the tick they are;
  // then the shortest form, in plain digits between 1e-4 and 1e7.
  const double v = std::stod(fmt::format("{:.12g}", value));
  if (v == 0) return "0";
  if (std::abs(v) >= 1e-4 && std::abs(v) < 1e7) {
    std::string text = fmt::format("{:f}", v);
    text.erase(text.find_last_not_of('0') + 1);
    if (text.back() == '.') text.pop_back();
    if (std::stod(text) == v) return text;
  }
  return fmt::format("{}", v);
}

std::string escape_html(const std::string& text) {
  std::string out;
  for (char ch : text) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += ch;
    }
  }
  return out;
}

std::string line_chart_svg(const Chart& c) {
  Frame f{c};
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const auto& s : c.series)
    for (double v : s.values)
      if (usable(v, c.log_y)) lo = std::min(lo, v), hi = std::max(hi, v);
  if (!std::isfinite(lo)) lo = c.log_y ? 1 : 0, hi = lo + 1;
  if (c.log_y && hi <= lo) hi = lo * 10;
  if (!c.log_y) lo = std::min(0.0, lo), hi = hi > lo ? hi : lo + 1;
  // The axis runs from tick to tick.
  const auto ticks = round_ticks(lo, hi, c.log_y);
  f.low = std::min(lo, ticks.front());
  f.high = std::max(hi, ticks.back());
  std::string out = frame_svg(f);
  const size_t n = c.categories.size();
  for (size_t s = 0; s < c.series.size(); ++s) {
    // A gap (no value) breaks the line: points either side are not joined.
    std::vector<std::string> runs(1);
    for (size_t i = 0; i < n && i < c.series[s].values.size(); ++i) {
      const double v = c.series[s].values[i];
      if (!usable(v, c.log_y)) {
        if (!runs.back().empty()) runs.emplace_back();
        continue;
      }
      runs.back() += fmt::format("{:.1f},{:.1f} ", f.x_at(i, n), f.map(v));
      out += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.5\" fill=\"{}\"/>\n", f.x_at(i, n),
                         f.map(v), kColors[s % 10]);
    }
    for (const auto& points : runs)
      if (!points.empty())
        out += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"{}/>\n",
                           points, kColors[s % 10], dash(s));
  }
  return out + x_labels_svg(f, false) + legend_svg(c) + "</svg>\n";
}

std::string bar_chart_svg(const Chart& c) {
  Frame f{c};
  const size_t n = c.categories.size();
  double hi = 0;
  for (size_t i = 0; i < n; ++i) {
    double sum = 0;
    for (const auto& s : c.series)
      if (i < s.values.size() && std::isfinite(s.values[i]) && s.values[i] > 0) sum += s.values[i];
    hi = std::max(hi, sum);
  }
  const auto ticks = round_ticks(0, hi > 0 ? hi : 1, false);
  f.low = 0;
  f.high = ticks.back();
  std::string out = frame_svg(f);
  const double slot = f.plot_w() / static_cast<double>(std::max<size_t>(n, 1));
  for (size_t i = 0; i < n; ++i) {
    double base = 0;
    for (size_t s = 0; s < c.series.size(); ++s) {
      const double v = i < c.series[s].values.size() ? c.series[s].values[i] : 0;
      if (!std::isfinite(v) || v <= 0) continue;
      const double top = f.map(base + v), bottom = f.map(base);
      out += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"/>\n",
                         kLeft + slot * static_cast<double>(i) + slot * 0.1, top, slot * 0.8,
                         bottom - top, kColors[s % 10]);
      base += v;
    }
  }
  return out + x_labels_svg(f, true) + legend_svg(c) + "</svg>\n";
}

}  // namespace flexplan::whatif
