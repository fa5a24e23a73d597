// The cluster as a tree: the root is the top switch, inner nodes are switches or machines,
// leaves are learners (GPUs). Every non-root node owns the full-duplex link to its parent.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <boost/graph/adjacency_list.hpp>

namespace flexplan {

// The most nodes a topology may have. Readers and what-if edits refuse larger trees before
// building them; a node costs about 600 bytes at its peak (docs/topology.md, "Errors").
inline constexpr int kMaxTopologyNodes = 2'000'000;
// The most bytes that a tree's names and full names (paths from the root) may expand to. The
// node limit alone lets a long name under a large count through (a 20 KB file could ask for
// 4 GB of full names).
inline constexpr double kMaxTopologyNameBytes = 256.0 * 1024 * 1024;

// One direction of a full-duplex link; the same figures hold in the other direction at once.
struct Link {
  double bandwidth = 0;  // bytes per second
  double latency = 0;    // seconds
};

struct TopoNodeProps {
  std::string name;       // name among its siblings ("gpu2"); Topology::full_name joins the path
  Link link;              // link to the parent; unused on the root
  int rank = -1;          // learner rank, -1 for switches and machines
};

// Edges point parent -> child; the edge's property is the child's uplink.
using TopoGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS,
                                        TopoNodeProps, Link>;
using NodeId = int;

// A malformed topology. `where` is the JSON location ("root.children[1].link.bandwidth").
class TopologyError : public std::runtime_error {
 public:
  TopologyError(std::string where, const std::string& what)
      : std::runtime_error(where.empty() ? what : where + ": " + what), where_(std::move(where)) {}
  const std::string& where() const { return where_; }

 private:
  std::string where_;
};

class Topology {
 public:
  // Builds the tree from a graph whose node 0 is the root and whose learners carry ranks
  // 0..P-1. Parsers use this; tests may too.
  explicit Topology(std::string name, TopoGraph graph);

  const std::string& name() const { return name_; }
  const TopoGraph& graph() const { return graph_; }

  // Nodes
  int num_nodes() const { return static_cast<int>(parent_.size()); }
  NodeId root() const { return 0; }
  const TopoNodeProps& node(NodeId n) const { return graph_[n]; }
  // The path from the root joined by '/' ("switch/m1/gpu2"), made when asked: kept for every
  // node, the full names were a third of a million-learner tree's memory.
  std::string full_name(NodeId n) const;
  NodeId parent(NodeId n) const { return parent_[n]; }  // -1 for the root
  std::span<const NodeId> children(NodeId n) const { return children_[n]; }
  int degree(NodeId n) const { return static_cast<int>(children_[n].size()); }
  bool is_learner(NodeId n) const { return children_[n].empty(); }
  // A machine: an inner node whose children are all learners.
  bool is_machine(NodeId n) const {
    if (is_learner(n)) return false;
    for (NodeId c : children_[n])
      if (!children_[c].empty()) return false;
    return true;
  }
  const Link& uplink(NodeId n) const { return graph_[n].link; }  // n != root
  int depth(NodeId n) const { return depth_[n]; }                // root is 0

  // Learners
  int num_learners() const { return static_cast<int>(learner_node_.size()); }
  NodeId learner_node(int rank) const { return learner_node_[rank]; }
  // Every learner's full name, by rank (what a plan's rank_names hold).
  std::vector<std::string> learner_names() const;
  int rank_of(NodeId learner) const { return graph_[learner].rank; }
  // Learner ranks under n, in depth-first order of the tree (n itself if it is a learner).
  std::span<const int> learners_under(NodeId n) const;

  // Levels as in the FlexReduce paper: a learner has level -1, a branch node has
  // level = 1 + max(level of its children), so level 0 is the bottom branch level and the
  // root has level num_levels() - 1.
  int level(NodeId n) const { return level_[n]; }
  int num_levels() const { return level_[root()] + 1; }
  std::span<const NodeId> nodes_at_level(int level) const { return by_level_[level]; }

  // Paths between learners, by rank.
  NodeId lca(int rank_a, int rank_b) const;
  // Nodes whose uplinks a message from rank a to rank b crosses: first the nodes climbed
  // from a up to (not including) the LCA, then those descended from the LCA down to b.
  // The first part is crossed upward, the second downward.
  struct Route {
    std::vector<NodeId> up;    // a, parent(a), ... child of LCA on a's side
    std::vector<NodeId> down;  // child of LCA on b's side, ..., b
  };
  Route route(int rank_a, int rank_b) const;
  double path_latency(int rank_a, int rank_b) const;

  // Same fan-out and same link figures across every depth, and all learners at one depth.
  bool is_symmetric() const { return symmetric_; }

  // The rate at which a learner sums a received range into its own, bytes/s, as the topology
  // gives it ("reduce_bandwidth"); 0 when it gives none. One figure for every learner. The
  // planner's library takes the rate in CostParams; flexplan's commands fill it from here.
  double reduce_bandwidth() const { return reduce_bandwidth_; }
  // Throws TopologyError unless `rate` is 0 (none) or positive and finite (the parser has
  // already held it to the bandwidths a link may have).
  void set_reduce_bandwidth(double rate);

  // The software cost of one hop (posting, matching, completing a send and its receive) on this
  // cluster, seconds, as the topology gives it ("hop_overhead", written by `flexplan probe`);
  // nullopt when it gives none. The commands price with it unless --hop-overhead says otherwise.
  std::optional<double> hop_overhead() const { return hop_overhead_; }
  // Throws TopologyError unless `seconds` is nullopt or from 0 to kMaxHopOverhead.
  void set_hop_overhead(std::optional<double> seconds);
  static constexpr double kMaxHopOverhead = 1.0;  // a second per hop: far beyond any runtime's

  // Stable content hash: same structure, names, link figures and ranks give the same hash
  // however the JSON was written (key order, `count` vs spelled out, unit spelling).
  uint64_t hash() const;
  std::string hash_hex() const;  // 16 lowercase hex digits

  // New figures for the uplinks of existing nodes, in place: shape, names and ranks stay, so
  // every index stays valid; the symmetry is recomputed, the hash when next asked for (O(nodes)
  // each). Pricing many link variants of one tree this way skips building a Topology for each.
  // Throws TopologyError naming the node for the root, a node that does not exist, or a figure
  // a link cannot have (the constructor's checks), and then changes nothing.
  struct UplinkChange {
    NodeId node = -1;
    Link link;
  };
  // What one set_uplinks call replaced, for undo().
  struct UplinkUndo {
    std::vector<UplinkChange> previous;
    std::optional<uint64_t> hash_before;  // when it was known
    bool symmetric_before = false;
    const Topology* topology = nullptr;  // the one changed
    uint64_t edit = 0;                   // which of its changes
  };
  UplinkUndo set_uplinks(std::span<const UplinkChange> changes);
  UplinkUndo set_uplink(NodeId node, const Link& link);
  // Takes back the latest set_uplinks to this object not yet undone (changes can be undone last
  // first), with the hash and symmetry from before it restored, not recomputed. Throws
  // std::logic_error for any other undo.
  void undo(const UplinkUndo&);

 private:
  void index();
  void put_uplink(NodeId node, const Link& link);  // no checks, no hash

  // The content hash, computed when first asked for after set_uplinks (pricing by closed forms
  // never asks). Atomic, so that threads sharing a const Topology may ask at once: each
  // computes the same value.
  class CachedHash {
   public:
    CachedHash() = default;
    CachedHash(const CachedHash& other) { *this = other; }
    CachedHash& operator=(const CachedHash& other) {
      value_.store(other.value_.load(std::memory_order_relaxed), std::memory_order_relaxed);
      known_.store(other.known_.load(std::memory_order_acquire), std::memory_order_release);
      return *this;
    }
    std::optional<uint64_t> get() const {
      if (!known_.load(std::memory_order_acquire)) return std::nullopt;
      return value_.load(std::memory_order_relaxed);
    }
    void set(uint64_t value) {
      value_.store(value, std::memory_order_relaxed);
      known_.store(true, std::memory_order_release);
    }
    void forget() { known_.store(false, std::memory_order_release); }

   private:
    std::atomic<uint64_t> value_{0};
    std::atomic<bool> known_{false};
  };

  std::string name_;
  TopoGraph graph_;
  std::vector<NodeId> preorder_;  // depth-first from the root, children in order
  std::vector<NodeId> parent_;
  std::vector<std::vector<NodeId>> children_;
  std::vector<int> depth_;
  std::vector<int> level_;
  std::vector<std::vector<NodeId>> by_level_;
  std::vector<NodeId> learner_node_;
  // learners_under(n) is the slice [first_, first_ + count_) of dfs_ranks_.
  std::vector<int> dfs_ranks_;
  std::vector<int> first_, count_;
  bool symmetric_ = false;
  double reduce_bandwidth_ = 0;
  std::optional<double> hop_overhead_;
  mutable CachedHash hash_;
  uint64_t edits_ = 0;  // set_uplinks calls in force (not undone), to match undos
};

// What a reader may build. The defaults hold any real cluster within about 1.6 GB; the fuzzer
// passes smaller ones, to reach the same refusals without building trees that take it minutes.
// Limits only tighten: figures above the defaults act as the defaults.
struct TopologyLimits {
  double max_nodes = kMaxTopologyNodes;
  double max_name_bytes = kMaxTopologyNameBytes;
};

// Parsing (topology/topology_json.cpp). Errors throw TopologyError naming the JSON location.
Topology parse_topology(const std::string& json_text, const std::string& source = "",
                        const TopologyLimits& limits = {});
Topology load_topology(const std::string& path);

// Units (planner/units.cpp): "10 GB/s" -> 1e10 bytes/s, "1 Gbit/s" -> 1.25e8 bytes/s,
// "50 us" -> 5e-5 s. Throw std::invalid_argument with a message naming the problem.
double parse_bandwidth(const std::string& text);
double parse_latency(const std::string& text);
std::string format_bandwidth(double bytes_per_second);  // "1.25 GB/s" or "1 Gbit/s"
std::string format_latency(double seconds);             // "50 us"

}  // namespace flexplan
