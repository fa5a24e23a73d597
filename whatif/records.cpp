// Text, JSON and CSV forms of a sweep (records.hpp).
#include "whatif/records.hpp"

#include <fmt/core.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "planner/size_format.hpp"

namespace flexplan::whatif {
namespace {

using Json = nlohmann::ordered_json;

std::string range_text(const SizeRange& r) {
  return fmt::format("{} from {}{}", r.algorithm, format_bytes(static_cast<double>(r.min_bytes)),
                     r.max_bytes ? " to " + format_bytes(static_cast<double>(*r.max_bytes)) : " up");
}

std::string percent(double fraction) { return fmt::format("{:.1f}%", 100 * fraction); }

constexpr size_t kUpgradesShown = 6;  // candidates listed in the text form

Json point_json(const Sweep& sweep, size_t index) {
  const SweepPoint& point = sweep.points[index];
  const PointResult& r = point.result;
  Json j;
  j["index"] = index;
  Json values = Json::object();
  for (size_t v = 0; v < sweep.variations.size(); ++v)
    values[sweep.variations[v].axis] = point.values[v];
  j["values"] = values;
  j["learners"] = r.learners;
  j["topology_hash"] = r.topology_hash;
  j["replanned_from_base_keeping"] = r.kept;
  Json ranges = Json::array();
  for (const auto& range : r.ranges)
    ranges.push_back({{"algorithm", range.algorithm},
                      {"min_bytes", range.min_bytes},
                      {"max_bytes", range.max_bytes ? Json(*range.max_bytes) : Json(nullptr)}});
  j["ranges"] = ranges;
  Json sizes = Json::array();
  for (const auto& s : r.sizes) {
    Json by = Json::object();
    for (const auto& [name, t] : s.by_algorithm) by[name] = t;
    sizes.push_back({{"bytes", s.bytes},
                     {"algorithm", s.algorithm},
                     {"time_s", s.time},
                     {"busbw_Bps", s.busbw},
                     {"ring_time_s", s.ring_time},
                     {"ring_busbw_Bps", s.ring_busbw},
                     {"saving", s.saving},
                     {"floor_ratio", s.floor_ratio},
                     {"by_algorithm_s", by}});
  }
  j["sizes"] = sizes;
  j["reference"] = {{"bytes", r.reference_bytes}, {"algorithm", r.reference_algorithm}};
  Json bottlenecks = Json::array();
  for (const auto& b : r.bottlenecks)
    bottlenecks.push_back({{"link", b.link},
                           {"direction", b.direction},
                           {"bandwidth_Bps", b.bandwidth},
                           {"bytes", b.bytes},
                           {"utilization", b.utilization}});
  j["bottlenecks"] = bottlenecks;
  const auto upgrade_json = [](const Upgrade& u) {
    return Json{{"target", u.target},
                {"links", u.links},
                {"before_s", u.before},
                {"after_s", u.after},
                {"gain", u.gain()},
                {"saved_s", u.saved()},
                {"cost", u.cost ? Json(*u.cost) : Json(nullptr)},
                {"saved_s_per_cost", u.cost ? Json(u.saved_per_cost()) : Json(nullptr)}};
  };
  Json upgrades = Json::array();
  for (const auto& u : r.upgrades) upgrades.push_back(upgrade_json(u));
  j["upgrades"] = upgrades;
  Json steps = Json::array();
  for (const auto& step : r.steps) {
    Json one = upgrade_json(step.upgrade);
    one["cumulative_gain"] = step.cumulative_gain;
    one["cumulative_cost"] = step.cumulative_cost ? Json(*step.cumulative_cost) : Json(nullptr);
    steps.push_back(std::move(one));
  }
  j["upgrade_steps"] = steps;
  if (r.step) {
    const auto& s = *r.step;
    Json buckets = Json::array();
    for (const auto& b : s.buckets)
      buckets.push_back({{"bytes", b.bytes}, {"ready_s", b.ready}, {"start_s", b.start}, {"end_s", b.end}});
    j["step"] = {{"compute_s", s.compute},
                 {"step_s", s.step},
                 {"exposed_s", s.exposed},
                 {"communication_s", s.communication},
                 {"efficiency", s.efficiency},
                 {"samples_per_s", s.samples_per_second},
                 {"buckets", buckets}};
  } else {
    j["step"] = nullptr;
  }
  return j;
}

// CSV fields are names, numbers and labels; quote those that could hold a comma or quote.
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::string cost_text(const Sweep& sweep, std::optional<double> cost) {
  const std::string unit = sweep.options.costs ? sweep.options.costs->unit : "";
  return cost ? fmt::format("{:.6g} {}", *cost, unit) : std::string("no price");
}

// The candidates of the first step, best first, then the sequence of steps.
std::string upgrades_text(const Sweep& sweep, const PointResult& r) {
  if (r.upgrades.empty()) return "";
  const AnalysisOptions& options = sweep.options;
  const std::string what = r.step ? "step" : "all-reduce";
  const bool costs = options.costs != nullptr;
  std::string out = fmt::format(
      "upgrades, each link's bandwidth x{:g} ({} {}{}), best {}:\n", options.upgrade_factor, what,
      format_seconds(r.upgrades.front().before),
      r.step ? "" : " at " + format_bytes(static_cast<double>(r.reference_bytes)),
      costs ? "time saved per cost first" : "time saved first");
  for (size_t k = 0; k < r.upgrades.size() && k < kUpgradesShown; ++k) {
    const Upgrade& u = r.upgrades[k];
    out += fmt::format("  {:<32} {:>4} link{} -> {:>10}  saves {:>10} ({:>6}){}\n", u.target, u.links,
                       u.links == 1 ? " " : "s", format_seconds(u.after),
                       u.saved() >= 0 ? format_seconds(u.saved()) : "-" + format_seconds(-u.saved()),
                       percent(u.gain()),
                       costs ? fmt::format("  cost {}{}", cost_text(sweep, u.cost),
                                           u.cost ? fmt::format(", {:.3g} s saved per {}", u.saved_per_cost(),
                                                                options.costs->unit)
                                                  : "")
                             : "");
  }
  if (r.upgrades.size() > kUpgradesShown)
    out += fmt::format("  ({} more in --format json)\n", r.upgrades.size() - kUpgradesShown);
  if (r.steps.empty()) {
    out += fmt::format("advice: no upgrade shortens the {}\n", what);
    return out;
  }
  out += "advice, each step applied on top of the ones before:\n";
  for (size_t k = 0; k < r.steps.size(); ++k) {
    const UpgradeStep& step = r.steps[k];
    const Upgrade& u = step.upgrade;
    out += fmt::format("  {}. {} ({} link{}): {} -> {}, {} faster in all{}\n", k + 1, u.target, u.links,
                       u.links == 1 ? "" : "s", format_seconds(u.before), format_seconds(u.after),
                       percent(step.cumulative_gain),
                       costs ? fmt::format("; cost {}, {} in all", cost_text(sweep, u.cost),
                                           cost_text(sweep, step.cumulative_cost))
                             : "");
  }
  return out;
}

}  // namespace

std::string sweep_json(const Sweep& sweep) {
  Json j;
  j["format"] = "flexplan-whatif";
  j["version"] = kJsonVersion;
  j["topology"] = {{"name", sweep.topology_name}, {"file", sweep.topology_file}};
  Json variations = Json::array();
  for (const auto& v : sweep.variations)
    variations.push_back({{"axis", v.axis}, {"text", v.text}, {"values", v.labels}});
  j["variations"] = variations;
  j["sizes"] = sweep.options.sizes;
  j["algorithms_left_out"] = sweep.left_out;
  j["upgrade"] = {{"factor", sweep.options.upgrade_factor},
                  {"steps", sweep.options.upgrade_steps},
                  {"costs", sweep.options.costs ? Json{{"file", sweep.options.costs->file},
                                                       {"unit", sweep.options.costs->unit}}
                                                : Json(nullptr)}};
  if (const Workload* w = sweep.options.workload)
    j["workload"] = {{"name", w->name},
                     {"source", w->source},
                     {"gradient_bytes", w->gradient_bytes()},
                     {"compute_s", w->compute_seconds()},
                     {"samples_per_learner", w->samples_per_learner},
                     {"bucket_bytes", w->bucket_bytes}};
  else
    j["workload"] = nullptr;
  Json points = Json::array();
  for (size_t i = 0; i < sweep.points.size(); ++i) points.push_back(point_json(sweep, i));
  j["points"] = points;
  return j.dump(1) + "\n";
}

std::string sweep_csv(const Sweep& sweep) {
  std::string out = "point";
  for (const auto& v : sweep.variations) out += "," + csv_field(v.axis);
  out += ",learners,bytes,algorithm,time_s,busbw_Bps,ring_time_s,ring_busbw_Bps,saving,"
         "floor_ratio,bottleneck_link,bottleneck_direction,bottleneck_utilization,"
         "upgrade_target,upgrade_gain,step_s,exposed_s,efficiency,samples_per_s\n";
  for (size_t i = 0; i < sweep.points.size(); ++i) {
    const auto& point = sweep.points[i];
    const auto& r = point.result;
    std::string prefix = std::to_string(i);
    for (const auto& value : point.values) prefix += "," + csv_field(value);
    std::string tail;
    if (r.bottlenecks.empty()) tail += ",,,";
    else
      tail += fmt::format(",{},{},{:.6g}", csv_field(r.bottlenecks[0].link),
                          r.bottlenecks[0].direction, r.bottlenecks[0].utilization);
    if (r.steps.empty()) tail += ",,";
    else tail += fmt::format(",{},{:.6g}", csv_field(r.steps[0].upgrade.target), r.steps[0].upgrade.gain());
    if (r.step)
      tail += fmt::format(",{:.9g},{:.9g},{:.6g},{:.6g}", r.step->step, r.step->exposed,
                          r.step->efficiency, r.step->samples_per_second);
    else
      tail += ",,,,";
    for (const auto& s : r.sizes)
      out += fmt::format("{},{},{},{},{:.9g},{:.6g},{:.9g},{:.6g},{:.6g},{:.6g}{}\n", prefix,
                         r.learners, s.bytes, s.algorithm, s.time, s.busbw, s.ring_time,
                         s.ring_busbw, s.saving, s.floor_ratio, tail);
  }
  return out;
}

std::string sweep_text(const Sweep& sweep) {
  std::string out = fmt::format("# flexplan whatif: topology {} ({}), {} point{}\n",
                                sweep.topology_name, sweep.topology_file, sweep.points.size(),
                                sweep.points.size() == 1 ? "" : "s");
  if (!sweep.left_out.empty())
    out += fmt::format("# left out somewhere (too big to build or price, or not suited): {}\n",
                       fmt::join(sweep.left_out, ", "));
  if (const Workload* w = sweep.options.workload)
    out += fmt::format("# workload {}: {} of gradients, {} compute per step, {} samples per "
                       "learner, buckets of {}\n#   {}\n",
                       w->name, format_bytes(w->gradient_bytes()), format_seconds(w->compute_seconds()),
                       w->samples_per_learner, format_bytes(w->bucket_bytes), w->source);
  for (size_t i = 0; i < sweep.points.size(); ++i) {
    const auto& point = sweep.points[i];
    const auto& r = point.result;
    std::string title = fmt::format("\n## point {}", i);
    for (size_t v = 0; v < sweep.variations.size(); ++v)
      title += fmt::format("{} {}={}", v ? "," : ":", sweep.variations[v].axis, point.values[v]);
    out += fmt::format("{} ({} learners)\n", title, r.learners);
    if (!r.kept.empty())
      out += fmt::format("re-planned from the plan of the tree as given, its schedules raced again: {}\n",
                         fmt::join(r.kept, ", "));
    std::vector<std::string> ranges;
    for (const auto& range : r.ranges) ranges.push_back(range_text(range));
    out += fmt::format("chosen: {}\n", fmt::join(ranges, "; "));
    out += fmt::format("  {:>10}  {:<18} {:>10} {:>9}  {:>10} {:>9}  {:>7} {:>7}\n", "size",
                       "algorithm", "time", "busbw", "ring", "busbw", "saving", "/floor");
    for (const auto& s : r.sizes)
      out += fmt::format("  {:>10}  {:<18} {:>10} {:>9}  {:>10} {:>9}  {:>7} {:>7}\n",
                         format_bytes(static_cast<double>(s.bytes)), s.algorithm,
                         format_seconds(s.time), format_gbps(s.busbw), format_seconds(s.ring_time),
                         format_gbps(s.ring_busbw), percent(s.saving),
                         s.floor_ratio > 0 ? fmt::format("{:.2f}", s.floor_ratio) : "-");
    if (!r.bottlenecks.empty()) {
      out += fmt::format("bottlenecks at {} ({}):\n",
                         format_bytes(static_cast<double>(r.reference_bytes)), r.reference_algorithm);
      for (const auto& b : r.bottlenecks)
        out += fmt::format("  {:<40} {:<4} {:>10}  busy {} of the time\n", b.link, b.direction,
                           format_bandwidth(b.bandwidth), percent(b.utilization));
    }
    out += upgrades_text(sweep, r);
    if (r.step)
      out += fmt::format("step: {} = compute {} + exposed communication {} (all-reduces {} in "
                         "{} buckets); scaling efficiency {}; {:.1f} samples/s\n",
                         format_seconds(r.step->step), format_seconds(r.step->compute),
                         format_seconds(r.step->exposed), format_seconds(r.step->communication),
                         r.step->buckets.size(), percent(r.step->efficiency),
                         r.step->samples_per_second);
  }
  return out;
}

}  // namespace flexplan::whatif
