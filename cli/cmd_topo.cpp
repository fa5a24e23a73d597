// `flexplan topo show TOPOLOGY.json`: prints a topology so a person can check it: a summary
// per level, the tree with identical sibling subtrees folded ("m[0..15] x16"), the slowest
// links, and whether (and why not) the tree is symmetric; --format json the same but the tree.
// The folded tree is cli/topo_tree.cpp. `flexplan topo import` (cli/topo_import.cpp) is added
// here beside it.
#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cli/arguments.hpp"
#include "cli/command.hpp"
#include "cli/topo_import.hpp"
#include "cli/topo_tree.hpp"
#include "topology/topology.hpp"

namespace flexplan::cli {
namespace {

struct ShowOptions {
  std::string path;
  int max_lines = 120;
  std::string format = "text";
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

struct LevelSpread {
  Spread fan_out, learners, bandwidth, latency;
};

LevelSpread level_spread(const Topology& topo, const std::vector<NodeId>& nodes) {
  LevelSpread s;
  for (NodeId v : nodes) {
    s.fan_out.add(topo.degree(v));
    s.learners.add(static_cast<double>(topo.learners_under(v).size()));
    if (v != topo.root()) {
      s.bandwidth.add(topo.uplink(v).bandwidth);
      s.latency.add(topo.uplink(v).latency);
    }
  }
  return s;
}

void print_level_row(const Topology& topo, const std::string& label,
                     const std::vector<NodeId>& nodes) {
  const auto [fan_out, learners, bandwidth, latency] = level_spread(topo, nodes);
  auto whole = [](double v) { return fmt::format("{}", static_cast<long long>(v)); };
  fmt::print("  {:<9} {:>7}  {:>8}  {:>13}  {:>22}  {:>14}\n", label, nodes.size(),
             fan_out.high == 0 ? "-" : range_text(fan_out.low, fan_out.high, whole),
             range_text(learners.low, learners.high, whole),
             bandwidth.empty ? "-" : range_text(bandwidth.low, bandwidth.high, format_bandwidth),
             latency.empty ? "-" : range_text(latency.low, latency.high, format_latency));
}

// Each level's nodes, top first, then the learners ("learners").
std::vector<std::pair<std::string, std::vector<NodeId>>> levels(const Topology& topo) {
  std::vector<std::pair<std::string, std::vector<NodeId>>> out;
  for (int level = topo.num_levels() - 1; level >= 0; --level) {
    const auto nodes = topo.nodes_at_level(level);
    out.emplace_back(std::to_string(level), std::vector<NodeId>(nodes.begin(), nodes.end()));
  }
  std::vector<NodeId> learners;
  for (int r = 0; r < topo.num_learners(); ++r) learners.push_back(topo.learner_node(r));
  out.emplace_back("learners", std::move(learners));
  return out;
}

void print_levels(const Topology& topo) {
  fmt::print("levels (level 0 is the bottom branch level; links are each node's uplink):\n");
  fmt::print("  {:<9} {:>7}  {:>8}  {:>13}  {:>22}  {:>14}\n", "level", "nodes", "fan-out",
             "learners/node", "uplink bandwidth", "uplink latency");
  for (const auto& [label, nodes] : levels(topo)) print_level_row(topo, label, nodes);
}

// ---- bottleneck and symmetry --------------------------------------------------------------

// The slowest uplink bandwidth and the nodes whose uplinks have it.
std::pair<double, std::vector<NodeId>> slowest_links(const Topology& topo) {
  double slowest = 0;
  std::vector<NodeId> at_slowest;
  for (NodeId v = 0; v < topo.num_nodes(); ++v) {
    if (v == topo.root()) continue;
    const double bw = topo.uplink(v).bandwidth;
    if (at_slowest.empty() || bw < slowest) slowest = bw, at_slowest.clear();
    if (bw == slowest) at_slowest.push_back(v);
  }
  return {slowest, at_slowest};
}

void print_bottleneck(const Topology& topo) {
  const auto [slowest, at_slowest] = slowest_links(topo);
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

// --format json: the summary, the levels and the bottleneck; not the folded tree (the topology
// file itself is the tree as JSON).
void show_json(const Topology& topo) {
  using nlohmann::json;
  auto pair = [](const Spread& s) { return s.empty ? json(nullptr) : json::array({s.low, s.high}); };
  auto whole = [](const Spread& s) {
    return s.empty ? json(nullptr)
                   : json::array({static_cast<long long>(s.low), static_cast<long long>(s.high)});
  };
  json rows = json::array();
  for (const auto& [label, nodes] : levels(topo)) {
    const LevelSpread spread = level_spread(topo, nodes);
    rows.push_back({{"level", label},
                    {"nodes", nodes.size()},
                    {"fan_out", spread.fan_out.high == 0 ? json(nullptr) : whole(spread.fan_out)},
                    {"learners_per_node", whole(spread.learners)},
                    {"uplink_bytes_per_second", pair(spread.bandwidth)},
                    {"uplink_latency_seconds", pair(spread.latency)}});
  }
  const auto [slowest, at_slowest] = slowest_links(topo);
  json links = json::array();
  for (NodeId v : at_slowest) links.push_back(topo.full_name(v));
  const std::string why = asymmetry(topo);
  const json document{
      {"format", "flexplan-topology"},
      {"name", topo.name()},
      {"learners", topo.num_learners()},
      {"nodes", topo.num_nodes()},
      {"levels", topo.num_levels()},
      {"hash", topo.hash_hex()},
      {"symmetric", topo.is_symmetric()},
      {"asymmetry", topo.is_symmetric() ? json(nullptr) : json(why)},
      {"reduce_bytes_per_second",
       topo.reduce_bandwidth() > 0 ? json(topo.reduce_bandwidth()) : json(nullptr)},
      {"hop_overhead_seconds", topo.hop_overhead() ? json(*topo.hop_overhead()) : json(nullptr)},
      {"level_summary", rows},
      {"bottleneck", {{"bytes_per_second", slowest}, {"uplinks_of", links}}}};
  fmt::print("{}\n", document.dump(2));
}

void show(const ShowOptions& options) {
  const Topology topo = load_topology(options.path);
  if (options.format == "json") return show_json(topo);
  fmt::print("topology {}: {}, {}, {}, {}\n", topo.name(), plural(topo.num_learners(), "learner"),
             plural(topo.num_nodes(), "node"), plural(topo.num_levels(), "level"),
             topo.is_symmetric() ? "symmetric" : "asymmetric");
  fmt::print("hash {}\n", topo.hash_hex());
  if (topo.reduce_bandwidth() > 0)
    fmt::print("reductions at {} per learner\n", format_bandwidth(topo.reduce_bandwidth()));
  if (topo.hop_overhead())
    fmt::print("software cost per hop {} (\"hop_overhead\"; the commands use it unless --hop-overhead is given)\n",
               format_latency(*topo.hop_overhead()));
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
  add_format_option(*show_command, options->format);
  show_command->callback([options] { show(*options); });
  add_topo_import(*topo);
}

const Registration registration("topo", setup);

}  // namespace
}  // namespace flexplan::cli
