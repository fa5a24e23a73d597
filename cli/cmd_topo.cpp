// `flexplan topo show TOPOLOGY.json`: prints a topology so a person can check it: a summary
// per level, the tree with identical sibling subtrees folded ("m[0..15] x16"), the slowest
// links, and whether (and why not) the tree is symmetric. The folded tree is cli/topo_tree.cpp.
// `flexplan topo import` (cli/topo_import.cpp) is added here beside it.
#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "cli/command.hpp"
#include "cli/topo_import.hpp"
#include "cli/topo_tree.hpp"
#include "topology/topology.hpp"

namespace flexplan::cli {
namespace {

struct ShowOptions {
  std::string path;
  int max_lines = 120;
};

// "2" or "2..3"
template <typename T, typename Format>
std::string range_text(T low, T high, Format format) {
  return low == high ? format(low) : format(low) + ".." + format(high);
}

// ---- summary per level --------------------------------------------------------------------

struct Spread {
  double low = 0, high = 0;
  bool empty = true;
  void add(double v) {
    low = empty ? v : std::min(low, v);
    high = empty ? v : std::max(high, v);
    empty = false;
  }
};

void print_level_row(const Topology& topo, const std::string& label,
                     const std::vector<NodeId>& nodes) {
  Spread fan_out, learners, bandwidth, latency;
  for (NodeId v : nodes) {
    fan_out.add(topo.degree(v));
    learners.add(static_cast<double>(topo.learners_under(v).size()));
    if (v != topo.root()) {
      bandwidth.add(topo.uplink(v).bandwidth);
      latency.add(topo.uplink(v).latency);
    }
  }
  auto whole = [](double v) { return fmt::format("{}", static_cast<long long>(v)); };
  fmt::print("  {:<9} {:>7}  {:>8}  {:>13}  {:>22}  {:>14}\n", label, nodes.size(),
             fan_out.high == 0 ? "-" : range_text(fan_out.low, fan_out.high, whole),
             range_text(learners.low, learners.high, whole),
             bandwidth.empty ? "-" : range_text(bandwidth.low, bandwidth.high, format_bandwidth),
             latency.empty ? "-" : range_text(latency.low, latency.high, format_latency));
}

void print_levels(const Topology& topo) {
  fmt::print("levels (level 0 is the bottom branch level; links are each node's uplink):\n");
  fmt::print("  {:<9} {:>7}  {:>8}  {:>13}  {:>22}  {:>14}\n", "level", "nodes", "fan-out",
             "learners/node", "uplink bandwidth", "uplink latency");
  for (int level = topo.num_levels() - 1; level >= 0; --level) {
    const auto nodes = topo.nodes_at_level(level);
    print_level_row(topo, std::to_string(level), std::vector<NodeId>(nodes.begin(), nodes.end()));
  }
  std::vector<NodeId> learners;
  for (int r = 0; r < topo.num_learners(); ++r) learners.push_back(topo.learner_node(r));
  print_level_row(topo, "learners", learners);
}

// ---- bottleneck and symmetry --------------------------------------------------------------

void print_bottleneck(const Topology& topo) {
  double slowest = 0;
  std::vector<NodeId> at_slowest;
  for (NodeId v = 0; v < topo.num_nodes(); ++v) {
    if (v == topo.root()) continue;
    const double bw = topo.uplink(v).bandwidth;
    if (at_slowest.empty() || bw < slowest) slowest = bw, at_slowest.clear();
    if (bw == slowest) at_slowest.push_back(v);
  }
  std::string names;
  for (size_t k = 0; k < at_slowest.size() && k < 4; ++k)
    names += (k ? ", " : "") + topo.full_name(at_slowest[k]);
  if (at_slowest.size() > 4) names += fmt::format(" and {} more", at_slowest.size() - 4);
  fmt::print("bottleneck: {} on {}: the uplink{} of {}\n", format_bandwidth(slowest),
             plural(at_slowest.size(), "link"), at_slowest.size() == 1 ? "" : "s", names);
}

// The first difference that makes the tree asymmetric, or "" when it is symmetric.
std::string asymmetry(const Topology& topo) {
  std::map<int, NodeId> first_at_depth;
  for (NodeId v = 0; v < topo.num_nodes(); ++v) {
    auto [it, fresh] = first_at_depth.try_emplace(topo.depth(v), v);
    if (fresh) continue;
    const NodeId ref = it->second;
    if (topo.degree(v) != topo.degree(ref)) {
      auto role = [&](NodeId n) {
        return topo.is_learner(n) ? std::string("is a learner")
                                  : "has " + plural(topo.degree(n), "child");
      };
      return fmt::format("at depth {}, {} {} but {} {}", topo.depth(v), topo.full_name(ref),
                         role(ref), topo.full_name(v), role(v));
    }
    const Link& a = topo.uplink(ref);
    const Link& b = topo.uplink(v);
    if (a.bandwidth != b.bandwidth || a.latency != b.latency)
      return fmt::format("at depth {}, the uplink of {} is {} but that of {} is {}", topo.depth(v),
                         topo.full_name(ref), link_text(a), topo.full_name(v), link_text(b));
  }
  return "";
}

void show(const ShowOptions& options) {
  const Topology topo = load_topology(options.path);
  fmt::print("topology {}: {}, {}, {}, {}\n", topo.name(), plural(topo.num_learners(), "learner"),
             plural(topo.num_nodes(), "node"), plural(topo.num_levels(), "level"),
             topo.is_symmetric() ? "symmetric" : "asymmetric");
  fmt::print("hash {}\n", topo.hash_hex());
  if (topo.reduce_bandwidth() > 0)
    fmt::print("reductions at {} per learner\n", format_bandwidth(topo.reduce_bandwidth()));
  fmt::print("\n");
  print_levels(topo);
  fmt::print("\n");
  print_folded_tree(topo, options.max_lines);
  fmt::print("\n");
  print_bottleneck(topo);
  if (topo.is_symmetric())
    fmt::print("symmetric: yes (one fan-out and one link figure per depth)\n");
  else
    fmt::print("symmetric: no ({})\n", asymmetry(topo));
}

void setup(CLI::App& app) {
  CLI::App* topo = app.add_subcommand("topo", "Inspect a cluster topology, or import one from what the cluster describes (docs/topology.md)");
  topo->require_subcommand(1);
  auto options = std::make_shared<ShowOptions>();
  CLI::App* show_command = topo->add_subcommand(
      "show", "Print a topology: levels, fan-outs, link figures, the tree, bottleneck links, "
              "symmetry");
  show_command->add_option("TOPOLOGY", options->path, "topology JSON file")->required();
  show_command
      ->add_option("--max-lines", options->max_lines,
                   "print at most this many lines of the tree (0: all)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  show_command->callback([options] { show(*options); });
  add_topo_import(*topo);
}

const Registration registration("topo", setup);

}  // namespace
}  // namespace flexplan::cli
