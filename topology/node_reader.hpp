// Reading a topology's JSON text into node descriptions, still unexpanded (internal to the
// topology library; topology_json.cpp then counts, names, ranks and builds the graph).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "topology/topology.hpp"

namespace flexplan::detail {

// No tree has more nodes than this (counts are clamped to it; a rank at or past it is refused
// while reading). parse_topology refuses trees past its limits before building them.
inline constexpr double kMaxNodes = kMaxTopologyNodes;

// One node object of the JSON, as written (`count` not yet expanded).
struct NodeSpec {
  const NodeSpec* parent = nullptr;  // for the JSON location
  size_t index = 0;                  // among the parent's children
  std::string name;                  // as written; may hold {i}
  bool has_count = false;
  double written_count = 1;  // as written, for the size check
  uint64_t count = 1;        // the same, once the size check has passed
  Link link;
  std::optional<int64_t> rank;  // first copy's rank; copy i takes rank + i
  std::vector<NodeSpec> children;

  bool is_learner() const { return children.empty(); }
  // JSON location, "root.children[1]".
  std::string location() const;
  // Name of copy `i`: {i} replaced by i, or i appended when the name has no {i}.
  std::string copy_name(uint64_t i) const;
  // location(), with " (copy i)" for a node with a count.
  std::string copy_location(uint64_t i) const;
};

struct TopologyText {
  std::string name;
  double reduce_bandwidth = 0;  // "reduce_bandwidth", bytes/s; 0 when not given
  std::optional<double> hop_overhead;  // "hop_overhead", seconds; nullopt when not given
  std::unique_ptr<NodeSpec> root;  // on the heap, so that its children's parent stays put
};

// Reads the JSON text in one pass over its events, without holding the whole document: each
// node object is checked and turned into a NodeSpec as soon as it ends. Errors are
// TopologyErrors naming the JSON location ("root.children[1].link.bandwidth") or, for syntax,
// "source:line:column". A syntax error or a repeated key anywhere is reported first, then the
// top level's fields, then the first fault found in the nodes.
TopologyText read_topology_text(const std::string& text, const std::string& source);

// "1,000,000", or "1e+300" past 10^18.
std::string with_commas(double value);

}  // namespace flexplan::detail
