// The HTML report of a sweep (html_report.hpp).
#include "whatif/html_report.hpp"

#include <algorithm>
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

// The plan's time at every --sizes entry over the points: one line per size.
std::string sizes_chart(const Sweep& sweep) {
  if (sweep.points.empty() || sweep.options.sizes.empty()) return "";
  Chart c;
  c.title = "Predicted all-reduce time of the plan, per message size";
  c.y_label = "time (ms, log scale)";
  c.log_y = true;
  for (size_t i = 0; i < sweep.points.size(); ++i) c.categories.push_back(point_label(sweep, i));
  for (size_t k = 0; k < sweep.options.sizes.size(); ++k) {
    Series series{format_bytes(double(sweep.options.sizes[k])), {}};
    for (const auto& point : sweep.points)
      series.values.push_back(k < point.result.sizes.size() ? point.result.sizes[k].time * 1e3
                                                             : std::numeric_limits<double>::quiet_NaN());
    c.series.push_back(std::move(series));
  }
  return line_chart_svg(c);
}

// At the reference size: the plan beside the ring and the unpipelined alternatives it raced.
std::string time_chart(const Sweep& sweep) {
  Chart c;
  const auto* first = sweep.points.empty() ? nullptr : reference_entry(sweep.points[0].result);
  if (!first) return "";
  c.title = fmt::format("All-reduce time of {}: the plan beside the alternatives", format_bytes(double(first->bytes)));
  c.y_label = "time (ms, log scale)";
  c.log_y = true;
  std::vector<std::string> names{"plan", "ring (NCCL's)"};
  for (const auto& point : sweep.points) {
    c.categories.push_back(point_label(sweep, &point - sweep.points.data()));
    if (const auto* s = reference_entry(point.result))
      for (const auto& entry : s->by_algorithm)
        if (entry.first.find('@') == std::string::npos && entry.first != "ring" &&
            std::find(names.begin(), names.end(), entry.first) == names.end())
          names.push_back(entry.first);
  }
  for (const auto& name : names) {
    Series series{name, {}};
    for (const auto& point : sweep.points) {
      double value = std::numeric_limits<double>::quiet_NaN();
      if (const auto* s = reference_entry(point.result)) {
        if (name == "plan") value = s->time * 1e3;
        else if (name == "ring (NCCL's)") value = s->ring_time * 1e3;
        else
          for (const auto& entry : s->by_algorithm)
            if (entry.first == name) value = entry.second * 1e3;
      }
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

// One line per link that is among the busiest at some point, named.
std::string utilization_chart(const Sweep& sweep) {
  Chart c;
  c.title = "Utilization of the busiest links at the reference size";
  c.y_label = "busy share of the all-reduce (%)";
  constexpr size_t kLinks = 10;
  std::vector<std::string> links;
  for (const auto& point : sweep.points)
    for (const auto& b : point.result.bottlenecks)
      if (links.size() < kLinks && std::find(links.begin(), links.end(), b.link) == links.end())
        links.push_back(b.link);
  if (links.empty()) return "";
  for (size_t i = 0; i < sweep.points.size(); ++i) c.categories.push_back(point_label(sweep, i));
  for (const auto& link : links) {
    Series series{link, {}};
    for (const auto& point : sweep.points) {
      double value = std::numeric_limits<double>::quiet_NaN();  // not among the busiest there
      for (const auto& b : point.result.bottlenecks)
        if (b.link == link) value = b.utilization * 100;
      series.values.push_back(value);
    }
    c.series.push_back(std::move(series));
  }
  return line_chart_svg(c);
}

std::string points_table(const Sweep& sweep) {
  std::string out = "<table>\n<tr><th>#</th>";
  for (const auto& v : sweep.variations) out += "<th>" + escape_html(v.axis) + "</th>";
  out += "<th>learners</th><th>size</th><th>algorithm</th><th>time</th><th>busbw</th><th>ring</th>"
         "<th>saving</th><th>/floor</th><th>busiest link</th><th>upgrades, in sequence</th>";
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
    if (r.steps.empty()) {
      out += "<td>-</td>";
    } else {
      out += "<td>";
      for (size_t k = 0; k < r.steps.size(); ++k)
        out += fmt::format("{}{}. {} (&minus;{:.1f}% in all)", k ? "<br>" : "", k + 1,
                           escape_html(r.steps[k].upgrade.target), 100 * r.steps[k].cumulative_gain);
      out += "</td>";
    }
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
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      // Nothing wider than the window: charts scale down (svg_chart.hpp), table cells wrap
      // anywhere (link names have no spaces).
      "<style>body{font-family:sans-serif;margin:16px;max-width:1100px}"
      "table{border-collapse:collapse;font-size:12px;max-width:100%}"
      "td,th{border:1px solid #ccc;padding:3px 5px;overflow-wrap:anywhere;vertical-align:top}"
      "th{background:#f4f4f4}svg{display:block;margin:12px 0}p,code{overflow-wrap:anywhere}</style>\n"
      "</head>\n<body>\n";
  out += fmt::format("<h1>What-if: {}</h1>\n<p>Topology file {}; {} point{}.",
                     escape_html(sweep.topology_name), escape_html(sweep.topology_file),
                     sweep.points.size(), sweep.points.size() == 1 ? "" : "s");
  for (const auto& v : sweep.variations) out += " Varied: <code>" + escape_html(v.text) + "</code>.";
  if (const Workload* w = sweep.options.workload)
    out += fmt::format(" Workload {}: {}.", escape_html(w->name), escape_html(w->source));
  if (sweep.options.advise)
    out += fmt::format(" Upgrades multiply a link's bandwidth by {:g}{}.", sweep.options.upgrade_factor,
                       sweep.options.costs ? escape_html(fmt::format("; prices from {} in {}", sweep.options.costs->file,
                                                                     sweep.options.costs->unit))
                                           : std::string());
  if (!sweep.left_out.empty())
    out += " Left out (too big to build or price): " + escape_html(fmt::format("{}", fmt::join(sweep.left_out, ", "))) + ".";
  out += "</p>\n";
  out += sizes_chart(sweep);
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
