// `flexplan topo show TOPOLOGY.json`: prints a topology so a person can check it: a summary
// per level, the tree with identical sibling subtrees folded ("m[0..15] x16"), the slowest
// links, and whether (and why not) the tree is symmetric.
#include <algorithm>
#include <cctype>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include "cli/command.hpp"
#include "planner/topology.hpp"

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

std::string plural(size_t n, std::string_view word) {
  if (n == 1) return fmt::format("1 {}", word);
  return fmt::format("{} {}", n, word == "child" ? "children" : std::string(word) + "s");
}

std::string link_text(const Link& link) {
  return fmt::format("{}, {}", format_bandwidth(link.bandwidth), format_latency(link.latency));
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

// ---- the tree, folded ---------------------------------------------------------------------

// Numbers subtrees so that two nodes get the same number exactly when their subtrees match:
// same uplink, and children with the same names and subtrees in the same order.
std::vector<int> subtree_shapes(const Topology& topo) {
  std::vector<NodeId> postorder;
  std::vector<std::pair<NodeId, bool>> stack{{topo.root(), false}};
  while (!stack.empty()) {
    auto [v, expanded] = stack.back();
    stack.pop_back();
    if (expanded) {
      postorder.push_back(v);
      continue;
    }
    stack.push_back({v, true});
    for (NodeId c : topo.children(v)) stack.push_back({c, false});
  }
  using Key = std::tuple<double, double, std::vector<std::pair<std::string, int>>>;
  std::map<Key, int> ids;
  std::vector<int> shape(topo.num_nodes(), -1);
  for (NodeId v : postorder) {
    Key key;
    if (v != topo.root()) std::get<0>(key) = topo.uplink(v).bandwidth, std::get<1>(key) = topo.uplink(v).latency;
    for (NodeId c : topo.children(v)) std::get<2>(key).emplace_back(topo.node(c).name, shape[c]);
    shape[v] = ids.try_emplace(std::move(key), static_cast<int>(ids.size())).first->second;
  }
  return shape;
}

// "gpu12" -> {"gpu", 12}; no trailing number (or a leading zero) -> index -1.
std::pair<std::string, long> split_index(const std::string& name) {
  size_t digits = name.size();
  while (digits > 0 && std::isdigit(static_cast<unsigned char>(name[digits - 1]))) --digits;
  const size_t length = name.size() - digits;
  if (length == 0 || length > 9 || (length > 1 && name[digits] == '0')) return {name, -1};
  return {name.substr(0, digits), std::stol(name.substr(digits))};
}

class TreePrinter {
 public:
  TreePrinter(const Topology& topo, int max_lines)
      : topo_(topo), shape_(subtree_shapes(topo)), max_lines_(max_lines) {}

  void print() {
    emit(topo_.full_name(topo_.root()) +
         fmt::format("  ({})", plural(topo_.learners_under(topo_.root()).size(), "learner")));
    print_children(topo_.root(), "", true);
    for (const std::string& line : lines_) fmt::print("{}\n", line);
    if (dropped_ > 0)
      fmt::print("... {} (--max-lines 0 prints all)\n", plural(dropped_, "more line"));
  }

 private:
  // `exact` is false below a folded group, where ranks would belong to the first copy only.
  void print_children(NodeId v, const std::string& indent, bool exact) {
    const auto children = topo_.children(v);
    for (size_t i = 0; i < children.size();) {
      const size_t run = run_length(children, i);
      const bool last = i + run == children.size();
      const NodeId first = children[i];
      std::string label = topo_.node(first).name;
      if (run > 1) {
        const auto [prefix, index] = split_index(label);
        label = fmt::format("{}[{}..{}] x{}", prefix, index, index + static_cast<long>(run) - 1, run);
      }
      std::string line = indent + (last ? "`-- " : "|-- ") + label + "  " + link_text(topo_.uplink(first));
      if (topo_.is_learner(first)) {
        if (exact) line += "  " + rank_text(children.subspan(i, run));
      } else {
        line += fmt::format("  ({}{})", plural(topo_.learners_under(first).size(), "learner"),
                            run > 1 ? " each" : "");
      }
      emit(std::move(line));
      if (!topo_.is_learner(first))
        print_children(first, indent + (last ? "    " : "|   "), exact && run == 1);
      i += run;
    }
  }

  // How many siblings from `i` on fold into one line: same subtree, names prefix0, prefix1...
  size_t run_length(std::span<const NodeId> siblings, size_t i) const {
    const auto [prefix, index] = split_index(topo_.node(siblings[i]).name);
    if (index < 0) return 1;
    size_t run = 1;
    while (i + run < siblings.size()) {
      const NodeId next = siblings[i + run];
      const auto [next_prefix, next_index] = split_index(topo_.node(next).name);
      if (shape_[next] != shape_[siblings[i]] || next_prefix != prefix ||
          next_index != index + static_cast<long>(run))
        break;
      ++run;
    }
    return run;
  }

  std::string rank_text(std::span<const NodeId> learners) const {
    const int first = topo_.rank_of(learners.front());
    bool consecutive = true;
    for (size_t k = 0; k < learners.size(); ++k)
      consecutive = consecutive && topo_.rank_of(learners[k]) == first + static_cast<int>(k);
    if (learners.size() == 1) return fmt::format("rank {}", first);
    if (consecutive) return fmt::format("ranks {}..{}", first, first + learners.size() - 1);
    std::string list;
    for (size_t k = 0; k < learners.size() && k < 8; ++k)
      list += (k ? "," : "") + std::to_string(topo_.rank_of(learners[k]));
    return "ranks " + list + (learners.size() > 8 ? ",..." : "");
  }

  void emit(std::string line) {
    if (max_lines_ > 0 && static_cast<int>(lines_.size()) >= max_lines_)
      ++dropped_;
    else
      lines_.push_back(std::move(line));
  }

  const Topology& topo_;
  std::vector<int> shape_;
  int max_lines_;
  std::vector<std::string> lines_;
  size_t dropped_ = 0;
};

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
  fmt::print("hash {}\n\n", topo.hash_hex());
  print_levels(topo);
  fmt::print("\n");
  TreePrinter(topo, options.max_lines).print();
  fmt::print("\n");
  print_bottleneck(topo);
  if (topo.is_symmetric())
    fmt::print("symmetric: yes (one fan-out and one link figure per depth)\n");
  else
    fmt::print("symmetric: no ({})\n", asymmetry(topo));
}

void setup(CLI::App& app) {
  CLI::App* topo = app.add_subcommand("topo", "Inspect a cluster topology (docs/topology.md)");
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
}

const Registration registration("topo", setup);

}  // namespace
}  // namespace flexplan::cli
