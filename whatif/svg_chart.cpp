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
constexpr int kLeft = 70, kRight = 170, kTop = 30, kBottom = 60;

struct Frame {
  const Chart& chart;
  double low = 0, high = 1;
  double plot_w() const { return chart.width - kLeft - kRight; }
  double plot_h() const { return chart.height - kTop - kBottom; }
  double map(double v) const {
    const double a = chart.log_y ? std::log10(v) : v, lo = chart.log_y ? std::log10(low) : low,
                 hi = chart.log_y ? std::log10(high) : high;
    return kTop + plot_h() * (1 - (a - lo) / (hi > lo ? hi - lo : 1));
  }
  double x_at(size_t i, size_t count) const {
    return kLeft + plot_w() * (count <= 1 ? 0.5 : static_cast<double>(i) / static_cast<double>(count - 1));
  }
};

std::string frame_svg(const Frame& f) {
  const Chart& c = f.chart;
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"18\" font-size=\"13\" font-weight=\"bold\">{3}</text>\n",
      c.width, c.height, kLeft, escape_html(c.title));
  out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#888\"/>\n",
                     kLeft, kTop, f.plot_w(), f.plot_h());
  // Five y ticks, evenly spaced on the axis's scale.
  for (int k = 0; k <= 4; ++k) {
    const double v = c.log_y ? std::pow(10, std::log10(f.low) + k * (std::log10(f.high) - std::log10(f.low)) / 4)
                             : f.low + k * (f.high - f.low) / 4;
    const double y = f.map(v);
    out += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#eee\"/>"
                       "<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:.3g}</text>\n",
                       kLeft, kLeft + f.plot_w(), y, y, kLeft - 4, y + 4, v);
  }
  out += fmt::format("<text x=\"14\" y=\"{}\" transform=\"rotate(-90 14 {})\" text-anchor=\"middle\">{}</text>\n",
                     kTop + f.plot_h() / 2, kTop + f.plot_h() / 2, escape_html(c.y_label));
  return out;
}

std::string legend_svg(const Chart& c) {
  std::string out;
  for (size_t s = 0; s < c.series.size(); ++s) {
    const double y = kTop + 14.0 * static_cast<double>(s);
    out += fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"10\" height=\"10\" fill=\"{}\"/>"
                       "<text x=\"{}\" y=\"{:.1f}\">{}</text>\n",
                       c.width - kRight + 10, y, kColors[s % 10], c.width - kRight + 24, y + 9,
                       escape_html(c.series[s].name));
  }
  return out;
}

std::string x_labels_svg(const Frame& f, bool bars) {
  const Chart& c = f.chart;
  std::string out;
  const size_t n = c.categories.size();
  const size_t every = std::max<size_t>(1, n / 12);  // at most about a dozen labels
  for (size_t i = 0; i < n; i += every) {
    const double x = bars ? kLeft + f.plot_w() * (static_cast<double>(i) + 0.5) / static_cast<double>(n)
                          : f.x_at(i, n);
    const double y = kTop + f.plot_h() + 14;
    out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\" transform=\"rotate(-30 {:.1f} {:.1f})\">{}</text>\n",
                       x, y, x, y, escape_html(c.categories[i]));
  }
  return out;
}

bool usable(double v, bool log) { return std::isfinite(v) && (!log || v > 0); }

}  // namespace

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
  if (c.log_y) {
    f.low = std::pow(10, std::floor(std::log10(lo)));
    f.high = std::pow(10, std::ceil(std::log10(hi)));
    if (f.high <= f.low) f.high = f.low * 10;
  } else {
    f.low = std::min(0.0, lo);
    f.high = hi > f.low ? hi * 1.05 : f.low + 1;
  }
  std::string out = frame_svg(f);
  const size_t n = c.categories.size();
  for (size_t s = 0; s < c.series.size(); ++s) {
    std::string points;
    for (size_t i = 0; i < n && i < c.series[s].values.size(); ++i) {
      const double v = c.series[s].values[i];
      if (!usable(v, c.log_y)) continue;
      points += fmt::format("{:.1f},{:.1f} ", f.x_at(i, n), f.map(v));
      out += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.5\" fill=\"{}\"/>\n", f.x_at(i, n),
                         f.map(v), kColors[s % 10]);
    }
    out += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"/>\n",
                       points, kColors[s % 10]);
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
  f.low = 0;
  f.high = hi > 0 ? hi * 1.05 : 1;
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
