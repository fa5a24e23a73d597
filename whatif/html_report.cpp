// The HTML report of a sweep (html_report.hpp).
#include "whatif/html_report.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>

#include <fmt/core.h>
#include <fmt/format.h>

#include "planner/size_format.hpp"
#include "whatif/svg_chart.hpp"

namespace flexplan::whatif {
namespace {

std::string point_label(const Sweep& sweep, size_t i) {
  if (sweep.variations.empty()) return "base";
  return fmt::format("{}", fmt::join(sweep.points[i].values, ", "));
}

// The size entry nearest the reference size (the reference when it is among --sizes).
const SizeResult* reference_entry(const PointResult& r) {
  const SizeResult* best = nullptr;
  for (const auto& s : r.sizes)
    if (!best || std::abs(std::log(double(s.bytes)) - std::log(double(r.reference_bytes))) <
                     std::abs(std::log(double(best->bytes)) - std::log(double(r.reference_bytes))))
      best = &s;
  return best;
}

std::string time_chart(const Sweep& sweep) {
  Chart c;
  const auto* first = sweep.points.empty() ? nullptr : reference_entry(sweep.points[0].result);
  if (!first) return "";
  c.title = fmt::format("All-reduce time of {} per algorithm", format_bytes(double(first->bytes)));
  c.y_label = "time (ms, log scale)";
  c.log_y = true;
  std::vector<std::string> names;
  for (const auto& point : sweep.points) {
    c.categories.push_back(point_label(sweep, &point - sweep.points.data()));
    if (const auto* s = reference_entry(point.result))
      for (const auto& [name, t] : s->by_algorithm)
        if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  for (const auto& name : names) {
    Series series{name, {}};
    for (const auto& point : sweep.points) {
      double value = std::numeric_limits<double>::quiet_NaN();
      if (const auto* s = reference_entry(point.result))
        for (const auto& [other, t] : s->by_algorithm)
          if (other == name) value = t * 1e3;
      series.values.push_back(value);
    }
    c.series.push_back(std::move(series));
  }
  return line_chart_svg(c);
}

std::string step_chart(const Sweep& sweep) {
  if (!sweep.options.workload) return "";
  Chart c;
  c.title = fmt::format("Training step of {}: compute and exposed communication",
                        sweep.options.workload->name);
  c.y_label = "time (ms)";
  Series compute{"compute", {}}, exposed{"exposed communication", {}};
  for (size_t i = 0; i < sweep.points.size(); ++i) {
    c.categories.push_back(point_label(sweep, i));
    const auto& step = sweep.points[i].result.step;
    compute.values.push_back(step ? step->compute * 1e3 : 0);
    exposed.values.push_back(step ? step->exposed * 1e3 : 0);
  }
  c.series = {compute, exposed};
  return bar_chart_svg(c);
}

std::string utilization_chart(const Sweep& sweep) {
  Chart c;
  c.title = "Utilization of the busiest links at the reference size";
  c.y_label = "busy share of the all-reduce (%)";
  const size_t depth = sweep.options.bottleneck_count;
  std::vector<Series> series(depth);
  for (size_t k = 0; k < depth; ++k) series[k].name = k == 0 ? "busiest link" : fmt::format("#{}", k + 1);
  for (size_t i = 0; i < sweep.points.size(); ++i) {
    c.categories.push_back(point_label(sweep, i));
    const auto& b = sweep.points[i].result.bottlenecks;
    for (size_t k = 0; k < depth; ++k)
      series[k].values.push_back(k < b.size() ? b[k].utilization * 100 : std::nan(""));
  }
  c.series = std::move(series);
  return line_chart_svg(c);
}

std::string points_table(const Sweep& sweep) {
  std::string out = "<table>\n<tr><th>#</th>";
  for (const auto& v : sweep.variations) out += "<th>" + escape_html(v.axis) + "</th>";
  out += "<th>learners</th><th>size</th><th>algorithm</th><th>time</th><th>busbw</th><th>ring</th>"
         "<th>saving</th><th>/floor</th><th>busiest link</th><th>upgrade first</th>";
  if (sweep.options.workload) out += "<th>step</th><th>exposed</th><th>efficiency</th><th>samples/s</th>";
  out += "</tr>\n";
  for (size_t i = 0; i < sweep.points.size(); ++i) {
    const auto& r = sweep.points[i].result;
    const SizeResult* s = reference_entry(r);
    out += fmt::format("<tr><td>{}</td>", i);
    for (const auto& value : sweep.points[i].values) out += "<td>" + escape_html(value) + "</td>";
    out += fmt::format("<td>{}</td>", r.learners);
    if (s)
      out += fmt::format("<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1f}%</td><td>{}</td>",
                         format_bytes(double(s->bytes)), escape_html(s->algorithm),
                         format_seconds(s->time), format_gbps(s->busbw), format_seconds(s->ring_time),
                         100 * s->saving, s->floor_ratio > 0 ? fmt::format("{:.2f}", s->floor_ratio) : "-");
    else
      out += "<td colspan=\"7\">-</td>";
    out += r.bottlenecks.empty()
               ? std::string("<td>-</td>")
               : fmt::format("<td>{} {} ({:.0f}%)</td>", escape_html(r.bottlenecks[0].link),
                             r.bottlenecks[0].direction, 100 * r.bottlenecks[0].utilization);
    out += r.upgrades.empty() ? std::string("<td>-</td>")
                              : fmt::format("<td>{} (-{:.1f}%)</td>", escape_html(r.upgrades[0].target),
                                            100 * r.upgrades[0].gain());
    if (sweep.options.workload) {
      if (r.step)
        out += fmt::format("<td>{}</td><td>{}</td><td>{:.1f}%</td><td>{:.1f}</td>",
                           format_seconds(r.step->step), format_seconds(r.step->exposed),
                           100 * r.step->efficiency, r.step->samples_per_second);
      else
        out += "<td colspan=\"4\">-</td>";
    }
    out += "</tr>\n";
  }
  return out + "</table>\n";
}

}  // namespace

std::string html_report(const Sweep& sweep) {
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<title>flexplan whatif: " + escape_html(sweep.topology_name) + "</title>\n"
      "<style>body{font-family:sans-serif;margin:20px;max-width:1100px}"
      "table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;padding:3px 6px}"
      "th{background:#f4f4f4}svg{display:block;margin:12px 0}</style>\n</head>\n<body>\n";
  out += fmt::format("<h1>What-if: {}</h1>\n<p>Topology file {}; {} point{}.",
                     escape_html(sweep.topology_name), escape_html(sweep.topology_file),
                     sweep.points.size(), sweep.points.size() == 1 ? "" : "s");
  for (const auto& v : sweep.variations) out += " Varied: <code>" + escape_html(v.text) + "</code>.";
  if (const Workload* w = sweep.options.workload)
    out += fmt::format(" Workload {}: {}.", escape_html(w->name), escape_html(w->source));
  if (!sweep.left_out.empty())
    out += " Left out (too big to build): " + escape_html(fmt::format("{}", fmt::join(sweep.left_out, ", "))) + ".";
  out += "</p>\n";
  out += time_chart(sweep);
  out += step_chart(sweep);
  out += utilization_chart(sweep);
  out += "<h2>Points</h2>\n" + points_table(sweep);
  out += "</body>\n</html>\n";
  return out;
}

std::string write_html_report(const Sweep& sweep, const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) throw std::runtime_error(fmt::format("--report {}: {}", dir, error.message()));
  const std::string path = (std::filesystem::path(dir) / "index.html").string();
  std::ofstream out(path);
  out << html_report(sweep);
  if (!out.flush()) throw std::runtime_error("--report: cannot write " + path);
  return path;
}

}  // namespace flexplan::whatif
