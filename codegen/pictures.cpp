// The predicted timeline as Chrome trace JSON, and the Graphviz diagram (pictures.hpp).
#include "codegen/pictures.hpp"

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "codegen/lowering.hpp"
#include "ir/collective_contract.hpp"
#include "ir/pipeline_form.hpp"
#include "planner/size_format.hpp"

namespace flexplan::codegen {
namespace {

std::string rank_label(const ir::Plan& plan, int32_t rank) {
  if (static_cast<size_t>(rank) < plan.rank_names.size())
    return fmt::format("rank {} ({})", rank, plan.rank_names[static_cast<size_t>(rank)]);
  return fmt::format("rank {}", rank);
}

std::string op_label(const ir::Op& op, size_t index) {
  return fmt::format("op {} {} [{},{}) root {}", index, ir::to_string(op.kind), op.begin, op.end, op.root);
}

}  // namespace

std::string trace_json(const ir::Plan& plan, size_t index, const Topology& topo, uint64_t bytes,
                       const CostParams& params) {
  if (index >= plan.schedules.size()) throw std::invalid_argument(fmt::format("the plan has no schedule {}", index));
  ir::require_materialized(plan.schedules[index], "trace_json");
  if (!plan.topology_hash.empty() && plan.topology_hash != topo.hash_hex())
    throw std::invalid_argument(fmt::format("topology '{}' has hash {}, but the plan was made for '{}' with hash {}",
                                            topo.name(), topo.hash_hex(), plan.topology_name, plan.topology_hash));
  if (topo.num_learners() != plan.world_size)
    throw std::invalid_argument(fmt::format("topology '{}' has {} learners, the plan {} ranks", topo.name(),
                                            topo.num_learners(), plan.world_size));
  const ir::Schedule& schedule = plan.schedules[index];
  const auto steps = evaluate_steps(topo, schedule, params);
  const double n = static_cast<double>(bytes);
  const double units = static_cast<double>(schedule.units);
  constexpr double kMicro = 1e6;  // trace times are in microseconds

  nlohmann::json events = nlohmann::json::array();
  const auto meta = [&](const char* what, int pid, int tid, const std::string& name) {
    nlohmann::json e{{"name", what}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", name}}}};
    if (tid >= 0) e["tid"] = tid;
    events.push_back(e);
  };
  constexpr int kSteps = 1, kRanks = 2, kLinks = 3;
  meta("process_name", kSteps, -1, fmt::format("{}: {} of {} on {}", schedule.algorithm, ir::describe_contract(schedule),
                                               format_bytes(static_cast<double>(bytes)), topo.name()));
  meta("process_name", kRanks, -1, "ranks");
  meta("process_name", kLinks, -1, "links (busy time per step)");
  meta("thread_name", kSteps, 0, "steps");
  for (int32_t r = 0; r < plan.world_size; ++r) meta("thread_name", kRanks, r, rank_label(plan, r));
  // Link directions get rows as they first carry something: node n's uplink, up or down.
  std::map<std::pair<NodeId, bool>, int> link_row;
  const auto row_of = [&](NodeId node, bool up) {
    const auto [it, fresh] = link_row.try_emplace({node, up}, static_cast<int>(link_row.size()));
    if (fresh) {
      const std::string parent = topo.full_name(topo.parent(node));
      meta("thread_name", kLinks, it->second,
           up ? fmt::format("{} -> {}", topo.full_name(node), parent)
              : fmt::format("{} -> {}", parent, topo.full_name(node)));
    }
    return it->second;
  };
  const auto slice = [&](int pid, int tid, double start, double duration, std::string name, nlohmann::json args) {
    events.push_back({{"name", std::move(name)}, {"ph", "X"}, {"pid", pid}, {"tid", tid}, {"ts", start * kMicro},
                      {"dur", duration * kMicro}, {"args", std::move(args)}});
  };

  double start = 0;
  for (size_t s = 0; s < schedule.steps.size(); ++s) {
    const ir::Step& step = schedule.steps[s];
    // The step's price, and what sets it: the busiest link (plus the slowest hop's latency) or
    // a chain's critical path through its chunk pipeline.
    const double length = steps[s].at(n, params.chunk_bytes);
    const double bandwidth_term = steps[s].per_byte * n + steps[s].hop_latency;
    slice(kSteps, 0, start, length,
          fmt::format("step {} {} level {}", s, ir::to_string(step.phase), step.level),
          {{"bandwidth_term_us", bandwidth_term * kMicro}, {"busiest_link_us", steps[s].per_byte * n * kMicro},
           {"slowest_hop_latency_us", steps[s].hop_latency * kMicro},
           {"bound_by", length > bandwidth_term * (1 + 1e-12) ? "a chain's pipeline" : "the busiest link"},
           {"ops", step.ops.size()}});
    std::map<int, double> link_busy;  // row -> time used so far in this step
    for (size_t o = 0; o < step.ops.size(); ++o) {
      const ir::Op& op = step.ops[o];
      const double op_bytes = n * static_cast<double>(op.end - op.begin) / units;
      for (const Hop& hop : lower_op(op)) {
        const nlohmann::json args{{"step", s}, {"op", o}, {"kind", ir::to_string(op.kind)},
                                  {"units", {op.begin, op.end}}, {"bytes", op_bytes},
                                  {"from", hop.src}, {"to", hop.dst}};
        slice(kRanks, hop.src, start, length, fmt::format("send {} to {}", op_label(op, o), hop.dst), args);
        slice(kRanks, hop.dst, start, length, fmt::format("recv {} from {}", op_label(op, o), hop.src), args);
        const Topology::Route route = topo.route(hop.src, hop.dst);
        for (const bool up : {true, false}) {
          for (const NodeId node : up ? route.up : route.down) {
            const int row = row_of(node, up);
            const double busy = op_bytes / topo.uplink(node).bandwidth;
            double& used = link_busy[row];
            slice(kLinks, row, start + used, busy,
                  fmt::format("{} -> {}: {}", hop.src, hop.dst, op_label(op, o)), args);
            used += busy;
          }
        }
      }
    }
    start += length;
  }
  nlohmann::json trace{{"traceEvents", events}, {"displayTimeUnit", "ms"},
                       {"otherData", {{"plan_topology", plan.topology_name}, {"schedule", index},
                                      {"algorithm", schedule.algorithm},
                                      {"collective", ir::to_string(schedule.collective)},
                                      {"contract", ir::describe_contract(schedule)}, {"bytes", bytes},
                                      {"predicted_seconds", start}}}};
  return trace.dump(1) + "\n";
}

namespace {

std::string dot_quoted(const std::string& text) {
  std::string q = "\"";
  for (const char c : text) {
    if (c == '\n') {  // Graphviz's line break
      q += "\\n";
      continue;
    }
    if (c == '"' || c == '\\') q += '\\';
    q += c;
  }
  return q + "\"";
}

// "0-3, 7, 9-10"
std::string rank_list(const std::vector<int32_t>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += fmt::format("{}{}", out.empty() ? "" : ", ",
                       j == i ? fmt::format("{}", ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]));
    i = j + 1;
  }
  return out;
}

// The machine view: a node per machine, an edge per (machine, machine, kind) summing its hops
// and the data they carry. Read from the base of a compact pipeline: every slice moves the same
// amounts between the same ranks.
std::string dot_machines(const ir::Plan& plan, size_t index, uint64_t hops) {
  const ir::Schedule& schedule = plan.schedules[index];
  // A learner's machine is its parent in the tree: its full name up to the last '/'.
  std::vector<size_t> machine_of(static_cast<size_t>(plan.world_size));
  std::vector<std::string> machines;
  std::map<std::string, size_t> machine_index;
  const bool named = plan.rank_names.size() == static_cast<size_t>(plan.world_size);
  for (int32_t r = 0; r < plan.world_size; ++r) {
    std::string name = fmt::format("rank {}", r);
    if (named) {
      const std::string& full = plan.rank_names[static_cast<size_t>(r)];
      const size_t slash = full.rfind('/');
      name = slash == std::string::npos || slash == 0 ? "(root)" : full.substr(0, slash);
    }
    const auto [it, added] = machine_index.try_emplace(name, machines.size());
    if (added) machines.push_back(name);
    machine_of[static_cast<size_t>(r)] = it->second;
  }
  struct Flow {
    uint64_t hops = 0;
    double vectors = 0;  // units carried over the schedule's units
  };
  std::map<std::tuple<size_t, size_t, bool>, Flow> flows;  // (from, to, reduce)
  const double units = static_cast<double>(ir::expanded_units(schedule));
  const uint64_t slices = schedule.slices;
  for (const ir::Step& step : schedule.steps)
    for (const ir::Op& op : step.ops)
      for (const Hop& hop : lower_op(op)) {
        Flow& flow = flows[{machine_of[static_cast<size_t>(hop.src)], machine_of[static_cast<size_t>(hop.dst)],
                            op.kind == ir::OpKind::Reduce}];
        flow.hops += slices;
        flow.vectors += static_cast<double>(slices) * static_cast<double>(op.end - op.begin) / units;
      }
  std::vector<std::vector<int32_t>> ranks(machines.size());
  for (int32_t r = 0; r < plan.world_size; ++r) ranks[machine_of[static_cast<size_t>(r)]].push_back(r);
  double heaviest = 0;
  for (const auto& [key, flow] : flows)
    if (std::get<0>(key) != std::get<1>(key)) heaviest = std::max(heaviest, flow.vectors);
  const std::string what = named ? "machine" : "rank (the plan names no learners)";
  std::string out = fmt::format(
      "// {} {} on {} ({} ranks, {} units): {} hops, grouped by {}.\n"
      "digraph plan {{\n  rankdir=LR;\n  labelloc=t;\n"
      "  label={};\n"
      "  node [shape=box, fontname=\"Helvetica\", fontsize=10];\n  edge [fontname=\"Helvetica\", fontsize=9];\n",
      schedule.algorithm, ir::describe_contract(schedule), plan.topology_name.empty() ? "-" : plan.topology_name,
      plan.world_size, ir::expanded_units(schedule), hops, what,
      dot_quoted(fmt::format("{} {} on {}: {} hops in {} steps, more than the {} drawn one by one, so grouped by {}: a "
                         "node per {}, an edge per direction and kind with its hops and the data they carry "
                         "(1 vector = the whole message; blue reduce, green broadcast)",
                         schedule.algorithm, ir::describe_contract(schedule),
                         plan.topology_name.empty() ? "-" : plan.topology_name, hops,
                         ir::expanded_step_count(schedule, schedule.slices), kMaxDrawnHops, what,
                         named ? "machine" : "rank")));
  for (size_t m = 0; m < machines.size(); ++m) {
    std::string label = fmt::format("{}\nranks {}", machines[m], rank_list(ranks[m]));
    for (const bool reduce : {true, false}) {
      const auto it = flows.find({m, m, reduce});
      if (it != flows.end())
        label += fmt::format("\n{} {} hops within, {:.3g} vectors", it->second.hops, reduce ? "reduce" : "broadcast",
                             it->second.vectors);
    }
    out += fmt::format("  m{} [label={}];\n", m, dot_quoted(label));
  }
  for (const auto& [key, flow] : flows) {
    const auto& [from, to, reduce] = key;
    if (from == to) continue;
    out += fmt::format("  m{} -> m{} [label={}, color={}, penwidth={:.2f}];\n", from, to,
                       dot_quoted(fmt::format("{} {} hops, {:.3g} vectors", flow.hops, reduce ? "reduce" : "bcast",
                                          flow.vectors)),
                       reduce ? "blue" : "darkgreen", heaviest > 0 ? 1 + 4 * flow.vectors / heaviest : 1.0);
  }
  out += "}\n";
  return out;
}

}  // namespace

std::string dot_graph(const ir::Plan& whole_or_compact, size_t index) {
  if (index >= whole_or_compact.schedules.size())
    throw std::invalid_argument(fmt::format("the plan has no schedule {}", index));
  uint64_t hops = 0;
  for (const ir::Step& step : whole_or_compact.schedules[index].steps)
    for (const ir::Op& op : step.ops) hops += lower_op(op).size();
  hops *= whole_or_compact.schedules[index].slices;
  if (hops > kMaxDrawnHops) return dot_machines(whole_or_compact, index, hops);
  const ir::Schedule schedule = ir::materialize(whole_or_compact.schedules[index]);
  const ir::Plan& plan = whole_or_compact;
  std::string out = fmt::format(
      "// {} {} on {} ({} ranks, {} units): one cluster per step, an edge per hop.\n"
      "digraph plan {{\n  rankdir=LR;\n  compound=true;\n  node [shape=box, fontname=\"Helvetica\", fontsize=10];\n"
      "  edge [fontname=\"Helvetica\", fontsize=9];\n",
      schedule.algorithm, ir::describe_contract(schedule), plan.topology_name.empty() ? "-" : plan.topology_name,
      plan.world_size, schedule.units);
  // Written last step first: Graphviz stacks the clusters of a left-to-right graph from the
  // bottom up, so step 0 ends on top.
  std::vector<std::string> clusters;
  for (size_t s = 0; s < schedule.steps.size(); ++s) {
    const ir::Step& step = schedule.steps[s];
    std::string out = fmt::format("  subgraph cluster_step{} {{\n    label={};\n    style=rounded;\n", s,
                       dot_quoted(fmt::format("step {}: {}, level {}", s, ir::to_string(step.phase), step.level)));
    std::map<int32_t, bool> present;
    for (const ir::Op& op : step.ops)
      for (const Hop& hop : lower_op(op)) present[hop.src] = present[hop.dst] = true;
    for (const auto& [rank, _] : present)
      out += fmt::format("    s{}_r{} [label={}];\n", s, rank, dot_quoted(rank_label(plan, rank)));
    for (size_t o = 0; o < step.ops.size(); ++o) {
      const ir::Op& op = step.ops[o];
      const bool reduce = op.kind == ir::OpKind::Reduce;
      for (const Hop& hop : lower_op(op))
        out += fmt::format("    s{}_r{} -> s{}_r{} [label={}, color={}{}];\n", s, hop.src, s, hop.dst,
                           dot_quoted(fmt::format("op {} {} [{},{})", o, reduce ? "reduce" : "bcast", op.begin, op.end)),
                           reduce ? "blue" : "darkgreen", hop.dst_contributes ? ", style=bold" : "");
    }
    out += "  }\n";
    clusters.push_back(std::move(out));
  }
  for (auto it = clusters.rbegin(); it != clusters.rend(); ++it) out += *it;
  out += "}\n";
  return out;
}

}  // namespace flexplan::codegen
