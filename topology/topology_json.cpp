// Reads a topology from its JSON form (docs/topology.md), so that every error names its JSON
// location and nothing large is allocated before the input is known good:
//   1. read the text into node descriptions (NodeSpec, node_reader.hpp), still unexpanded;
//   2. count what `count` would expand to, check names and ranks, then build the graph.
#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <tuple>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "topology/node_reader.hpp"
#include "topology/topology.hpp"

namespace flexplan {
namespace {

using detail::kMaxNodes;
using detail::NodeSpec;
using detail::with_commas;

std::string child_location(const std::string& parent, std::string_view key) {
  return parent.empty() ? std::string(key) : parent + "." + std::string(key);
}

// ---- pass 2: sizes, names, ranks, graph --------------------------------------------------

struct Size {
  double nodes = 0;
  double learners = 0;
  double ranked = 0;      // learners with an explicit rank
  double name_bytes = 0;  // names and full names of every copy, at most
  const NodeSpec* some_ranked = nullptr;
  const NodeSpec* some_unranked = nullptr;
};

// The longest name a copy of `spec` can get: each {i}, or the appended number when the name has
// none, becomes at most as many digits as the count has.
double longest_copy_name(const NodeSpec& spec) {
  if (!spec.has_count) return static_cast<double>(spec.name.size());
  size_t placeholders = 0;
  for (size_t at = spec.name.find("{i}"); at != std::string::npos; at = spec.name.find("{i}", at + 3))
    ++placeholders;
  const double digits = std::floor(std::log10(std::max(spec.written_count, 1.0))) + 1;
  return static_cast<double>(spec.name.size()) + static_cast<double>(std::max<size_t>(placeholders, 1)) * digits;
}

// What the subtree of `spec` expands to, all copies included. Doubles: exact below 2^53, and
// past the limit only the order of magnitude matters for the message. `parent_path` is the
// length of the parent's full name (-1 above the root, whose full name is its name).
void measure(const NodeSpec& spec, Size& total, double multiplier, double parent_path) {
  const double copies = multiplier * spec.written_count;
  const double name = longest_copy_name(spec);
  const double path = parent_path + 1 + name;
  total.nodes += copies;
  total.name_bytes += copies * (name + path);
  if (spec.is_learner()) {
    total.learners += copies;
    if (spec.rank) {
      total.ranked += copies;
      if (!total.some_ranked) total.some_ranked = &spec;
    } else if (!total.some_unranked) {
      total.some_unranked = &spec;
    }
  }
  for (const NodeSpec& child : spec.children) measure(child, total, copies, path);
}

// Sibling names after expansion must differ: "a1" next to "a" with count 2 collides. Names are
// looked up without copies, except those of the copies a count makes; the first repeat in file
// order is reported, against the sibling that used the name first.
void check_sibling_names(const NodeSpec& spec) {
  // Copies of one node are named apart by their index (copy_name: the same text around a
  // different number), so one child, counted or not, needs no check: a switch of a million
  // counted learners hashed a million names.
  if (spec.children.size() > 1) {
    size_t siblings = 0, copies = 0;
    for (const NodeSpec& child : spec.children) {
      siblings += child.count;
      if (child.has_count) copies += child.count;
    }
    std::vector<std::string> expanded;  // the copies' names; reserved, so views stay valid
    expanded.reserve(copies);
    std::unordered_map<std::string_view, std::pair<const NodeSpec*, uint64_t>> seen;
    seen.reserve(siblings);
    for (const NodeSpec& child : spec.children) {
      for (uint64_t i = 0; i < child.count; ++i) {
        const std::string_view name =
            child.has_count ? std::string_view(expanded.emplace_back(child.copy_name(i)))
                            : std::string_view(child.name);
        auto [it, fresh] = seen.try_emplace(name, &child, i);
        if (fresh) continue;
        const auto& [first, first_copy] = it->second;
        throw TopologyError(child.copy_location(i),
                            fmt::format("the name \"{}\" is already used by a sibling at {}; "
                                        "names must be unique among siblings",
                                        name, first->copy_location(first_copy)));
      }
    }
  }
  for (const NodeSpec& child : spec.children) check_sibling_names(child);
}

// Fills a graph whose vertices are allocated already; node ids follow depth-first order.
class GraphBuilder {
 public:
  GraphBuilder(TopoGraph& graph, int learners, bool explicit_ranks)
      : graph_(graph), explicit_ranks_(explicit_ranks), rank_owner_(learners) {}

  void add(const NodeSpec& spec, NodeId parent, uint64_t copy) {
    const NodeId id = next_++;
    TopoNodeProps& props = graph_[id];
    props.name = spec.copy_name(copy);
    props.link = spec.link;
    if (parent >= 0) boost::add_edge(parent, id, spec.link, graph_);
    if (spec.is_learner()) {
      props.rank = explicit_ranks_ ? assign_explicit_rank(spec, copy) : next_rank_++;
      return;
    }
    for (const NodeSpec& child : spec.children)
      for (uint64_t i = 0; i < child.count; ++i) add(child, id, i);
  }

 private:
  int assign_explicit_rank(const NodeSpec& spec, uint64_t copy) {
    const int learners = static_cast<int>(rank_owner_.size());
    const std::string where = child_location(spec.location(), "rank");
    const int64_t rank = *spec.rank + static_cast<int64_t>(copy);
    if (rank >= learners)
      throw TopologyError(where,
                          fmt::format("rank {}{} is outside 0..{}: ranks must be a permutation "
                                      "of 0..P-1 and there are {} learners",
                                      rank, spec.has_count ? fmt::format(" (copy {})", copy) : "",
                                      learners - 1, learners));
    auto& owner = rank_owner_[rank];
    if (owner.first)
      throw TopologyError(where,
                          fmt::format("rank {}{} is already taken by {}: ranks must be a "
                                      "permutation of 0..{}",
                                      rank, spec.has_count ? fmt::format(" (copy {})", copy) : "",
                                      owner.first->copy_location(owner.second), learners - 1));
    owner = {&spec, copy};
    return static_cast<int>(rank);
  }

  TopoGraph& graph_;
  bool explicit_ranks_;
  std::vector<std::pair<const NodeSpec*, uint64_t>> rank_owner_;
  NodeId next_ = 0;
  int next_rank_ = 0;
};

// Returned by value into Topology's parameter: the Boost graph has no move constructor, so
// this relies on the named return value being built in place rather than copied.
TopoGraph build_graph(const NodeSpec& root, const Size& size, bool explicit_ranks) {
  TopoGraph graph(static_cast<size_t>(size.nodes));
  GraphBuilder(graph, static_cast<int>(size.learners), explicit_ranks).add(root, -1, 0);
  return graph;
}

}  // namespace

Topology parse_topology(const std::string& json_text, const std::string& source,
                        const TopologyLimits& limits) {
  const detail::TopologyText text = detail::read_topology_text(json_text, source);
  const NodeSpec& root = *text.root;

  Size size;
  measure(root, size, 1, -1);
  // Limits only tighten the defaults: counts are clamped to the default node limit on reading.
  const double max_nodes = std::min(limits.max_nodes, kMaxNodes);
  const double max_name_bytes = std::min(limits.max_name_bytes, kMaxTopologyNameBytes);
  if (size.nodes > max_nodes)
    throw TopologyError("root", fmt::format("the tree expands to {} nodes, more than the limit of "
                                            "{}; is a count too large?",
                                            with_commas(size.nodes), with_commas(max_nodes)));
  if (size.name_bytes > max_name_bytes)
    throw TopologyError("root", fmt::format("the tree's names expand to {} bytes (full names, the "
                                            "paths from the root, included), more than the limit "
                                            "of {}; is a long name under a large count?",
                                            with_commas(size.name_bytes),
                                            with_commas(max_name_bytes)));
  if (size.learners < 2)
    throw TopologyError("root", fmt::format("the tree has {} learner; an all-reduce needs at least 2",
                                            with_commas(size.learners)));
  const bool explicit_ranks = size.ranked > 0;
  if (explicit_ranks && size.ranked < size.learners)
    throw TopologyError(size.some_unranked->location(),
                        fmt::format("this learner has no \"rank\" but {} has one; give every "
                                    "learner a rank or none",
                                    size.some_ranked->location()));
  check_sibling_names(root);

  Topology topology(text.name, build_graph(root, size, explicit_ranks));
  topology.set_reduce_bandwidth(text.reduce_bandwidth);
  topology.set_hop_overhead(text.hop_overhead);
  return topology;
}

Topology load_topology(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw TopologyError(path, "is a directory, not a topology file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TopologyError(path, fmt::format("cannot open: {}", std::strerror(errno)));
  // Read into one string reserved at the file's size (a string stream copied the
  // million-learner tree's 40 MB of JSON three times, each copy memory touched anew); a pipe or
  // a file that grows is read to its end all the same.
  std::string text;
  constexpr uintmax_t kLargestReservation = uintmax_t{1} << 30;  // past it, grown as read
  if (const auto size = std::filesystem::file_size(path, ec); !ec)
    text.reserve(static_cast<size_t>(std::min(size, kLargestReservation)));
  std::array<char, 1 << 16> buffer;
  while (in.read(buffer.data(), buffer.size()) || in.gcount() > 0)
    text.append(buffer.data(), static_cast<size_t>(in.gcount()));
  if (in.bad()) throw TopologyError(path, "cannot read the file");
  return parse_topology(text, path);
}

}  // namespace flexplan
