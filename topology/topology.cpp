// The in-memory topology: checks that the graph is a well-formed tree and precomputes every
// query the planner asks (parents, children, depths, levels, learner slices, the hash) so that
// each is O(1) or O(depth).
#include <algorithm>
#include <bit>
#include <cmath>
#include <span>
#include <stdexcept>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <fmt/core.h>

#include "topology/topology.hpp"

namespace flexplan {
namespace {

// FNV-1a, 64 bits, over a little-endian byte stream (see docs/topology.md, "Content hash").
class Fnv1a64 {
 public:
  void bytes(std::string_view data) {
    for (unsigned char c : data) {
      state_ ^= c;
      state_ *= 0x100000001b3ULL;
    }
  }
  void u64(uint64_t value) {
    for (int i = 0; i < 8; ++i) {
      state_ ^= static_cast<unsigned char>(value >> (8 * i));
      state_ *= 0x100000001b3ULL;
    }
  }
  void i64(int64_t value) { u64(static_cast<uint64_t>(value)); }
  void f64(double value) { u64(std::bit_cast<uint64_t>(value)); }
  uint64_t value() const { return state_; }

 private:
  uint64_t state_ = 0xcbf29ce484222325ULL;
};

bool same_link(const Link& a, const Link& b) {
  return a.bandwidth == b.bandwidth && a.latency == b.latency;
}

// Symmetric: one fan-out and one link figure per depth. Equal fan-outs per depth also put all
// learners (fan-out 0) at one depth.
bool same_shape_at_every_depth(const Topology& topo, std::span<const NodeId> preorder) {
  std::vector<NodeId> first_at_depth;
  for (NodeId v : preorder) {
    const size_t d = static_cast<size_t>(topo.depth(v));
    if (d == first_at_depth.size()) {
      first_at_depth.push_back(v);
      continue;
    }
    const NodeId ref = first_at_depth[d];
    if (topo.degree(v) != topo.degree(ref) ||
        (v != topo.root() && !same_link(topo.uplink(v), topo.uplink(ref))))
      return false;
  }
  return true;
}

// FNV-1a over the canonical serialization in preorder that docs/topology.md specifies.
uint64_t content_hash(const Topology& topo, std::span<const NodeId> preorder) {
  Fnv1a64 h;
  h.bytes("flexplan.topology.v1");
  for (NodeId v : preorder) {
    const TopoNodeProps& props = topo.node(v);
    h.u64(props.name.size());
    h.bytes(props.name);
    h.u64(static_cast<uint64_t>(topo.degree(v)));
    h.i64(props.rank);
    if (v != topo.root()) {
      h.f64(props.link.bandwidth);
      h.f64(props.link.latency);
    }
  }
  // Only when given, so that the hashes of topologies without one stay what they were.
  if (topo.reduce_bandwidth() > 0) {
    h.bytes("reduce_bandwidth");
    h.f64(topo.reduce_bandwidth());
  }
  if (topo.hop_overhead()) {
    h.bytes("hop_overhead");
    h.f64(*topo.hop_overhead());
  }
  return h.value();
}

// The figures every link must have; `where()` gives the node's full name, made only for an error.
template <typename Where>
void check_link(const Where& where, const Link& link) {
  if (!(link.bandwidth > 0) || !std::isfinite(link.bandwidth))
    throw TopologyError(where(), fmt::format("link bandwidth must be positive and finite, got {}",
                                             link.bandwidth));
  if (!(link.latency >= 0) || !std::isfinite(link.latency))
    throw TopologyError(where(), fmt::format("link latency must be non-negative and finite, got {}",
                                             link.latency));
}

}  // namespace

Topology::Topology(std::string name, TopoGraph graph) : name_(std::move(name)) {
  // boost's adjacency_list (1.74) declares a copy constructor and no move, and its swap copies
  // three times: moving it copied every node and edge (a million-learner tree: half a second).
  // Its containers are public; swapping them moves no element, so every edge iterator and
  // edge property pointer stays valid.
  graph_.m_vertices.swap(graph.m_vertices);
  graph_.m_edges.swap(graph.m_edges);
  graph_.m_property.swap(graph.m_property);
  index();
}

void Topology::index() {
  const size_t n = boost::num_vertices(graph_);
  if (n == 0) throw TopologyError("", "the topology has no nodes");
  if (n > static_cast<size_t>(kMaxTopologyNodes))
    throw TopologyError("", fmt::format("the topology has {} nodes, more than the limit of {}", n,
                                        kMaxTopologyNodes));
  auto describe = [this](NodeId v) {
    return fmt::format("node {} (\"{}\")", v, graph_[v].name);
  };

  for (NodeId v = 0; v < static_cast<NodeId>(n); ++v) {
    const size_t parents = boost::in_degree(v, graph_);
    if (v == root() && parents != 0)
      throw TopologyError(describe(v), "the root (node 0) cannot have a parent");
    if (v != root() && parents != 1)
      throw TopologyError(describe(v),
                          fmt::format("a tree node has exactly one parent, this one has {}",
                                      parents));
  }

  // Parents and children from the edges. Edge order is child order.
  parent_.assign(n, -1);
  children_.assign(n, {});
  for (NodeId v = 0; v < static_cast<NodeId>(n); ++v) {
    children_[v].reserve(boost::out_degree(v, graph_));
    for (auto [e, end] = boost::out_edges(v, graph_); e != end; ++e) {
      const NodeId child = static_cast<NodeId>(boost::target(*e, graph_));
      children_[v].push_back(child);
      parent_[child] = v;
      // The edge carries the uplink; the node keeps a copy. Whichever one a builder filled
      // in wins, and two different figures are an error.
      Link& on_edge = graph_[*e];
      Link& on_node = graph_[child].link;
      if (on_edge.bandwidth == 0 && on_edge.latency == 0) on_edge = on_node;
      if (on_node.bandwidth == 0 && on_node.latency == 0) on_node = on_edge;
      if (!same_link(on_edge, on_node))
        throw TopologyError(describe(child),
                            "the edge and the node disagree on the link to the parent");
    }
  }

  // Depth-first preorder from the root. With one parent per node, a node that the walk does
  // not reach sits on a cycle.
  std::vector<NodeId> preorder;
  preorder.reserve(n);
  depth_.assign(n, 0);
  {
    std::vector<NodeId> stack{root()};
    while (!stack.empty()) {
      const NodeId v = stack.back();
      stack.pop_back();
      preorder.push_back(v);
      for (auto c = children_[v].rbegin(); c != children_[v].rend(); ++c) {
        depth_[*c] = depth_[v] + 1;
        stack.push_back(*c);
      }
    }
  }
  if (preorder.size() != n) {
    std::vector<bool> seen(n, false);
    for (NodeId v : preorder) seen[v] = true;
    const NodeId lost = static_cast<NodeId>(std::find(seen.begin(), seen.end(), false) -
                                            seen.begin());
    throw TopologyError(describe(lost), "not reachable from the root: the edges form a cycle");
  }

  // Names: non-empty, no '/', unique among siblings; full names are paths from the root (made
  // when asked), and with the names they stay within kMaxTopologyNameBytes: their lengths are
  // counted here, a parent's first.
  double name_bytes = 0;
  std::vector<size_t> path_bytes(n, 0);
  for (NodeId v : preorder) {
    TopoNodeProps& props = graph_[v];
    if (props.name.empty()) throw TopologyError(describe(v), "a node needs a name");
    if (props.name.find('/') != std::string::npos)
      throw TopologyError(describe(v), "a name cannot contain '/' (it joins full names)");
    const size_t path = v == root() ? props.name.size() : path_bytes[parent_[v]] + 1 + props.name.size();
    path_bytes[v] = path;
    name_bytes += static_cast<double>(props.name.size() + path);
    if (name_bytes > kMaxTopologyNameBytes)
      throw TopologyError(describe(v), fmt::format("the names and full names pass the limit of {} "
                                                   "bytes", kMaxTopologyNameBytes));
    if (children_[v].size() > 1) {
      std::unordered_set<std::string_view> names;
      names.reserve(children_[v].size());
      for (NodeId c : children_[v])
        if (!names.insert(graph_[c].name).second)
          throw TopologyError(describe(c),
                              fmt::format("two children of \"{}\" are named \"{}\"",
                                          full_name(v), graph_[c].name));
    }
    if (v != root()) check_link([&] { return full_name(v); }, props.link);
  }

  // Levels bottom-up: in reverse preorder every child comes before its parent.
  level_.assign(n, -1);
  for (auto it = preorder.rbegin(); it != preorder.rend(); ++it)
    if (*it != root()) level_[parent_[*it]] = std::max(level_[parent_[*it]], level_[*it] + 1);
  if (level_[root()] < 0) throw TopologyError(full_name(root()), "the root has no children");
  by_level_.assign(level_[root()] + 1, {});
  for (NodeId v : preorder)
    if (level_[v] >= 0) by_level_[level_[v]].push_back(v);

  // Learners and their ranks: a permutation of 0..P-1.
  int learners = 0;
  for (NodeId v : preorder) {
    if (is_learner(v))
      ++learners;
    else if (graph_[v].rank != -1)
      throw TopologyError(full_name(v),
                          fmt::format("only learners have a rank, this node has children "
                                      "and rank {}",
                                      graph_[v].rank));
  }
  if (learners < 2)
    throw TopologyError(full_name(root()),
                        fmt::format("an all-reduce needs at least 2 learners, the tree has {}",
                                    learners));
  learner_node_.assign(learners, -1);
  for (NodeId v : preorder) {
    if (!is_learner(v)) continue;
    const int rank = graph_[v].rank;
    if (rank < 0 || rank >= learners)
      throw TopologyError(full_name(v),
                          fmt::format("rank {} is outside 0..{}", rank, learners - 1));
    if (learner_node_[rank] != -1)
      throw TopologyError(full_name(v),
                          fmt::format("rank {} is already taken by {}", rank,
                                      full_name(learner_node_[rank])));
    learner_node_[rank] = v;
  }

  // learners_under(v): learners in preorder are contiguous for every subtree.
  dfs_ranks_.clear();
  dfs_ranks_.reserve(learners);
  first_.assign(n, 0);
  count_.assign(n, 0);
  for (NodeId v : preorder) {
    first_[v] = static_cast<int>(dfs_ranks_.size());
    if (is_learner(v)) dfs_ranks_.push_back(graph_[v].rank);
  }
  for (auto it = preorder.rbegin(); it != preorder.rend(); ++it) {
    if (is_learner(*it)) count_[*it] = 1;
    if (*it != root()) count_[parent_[*it]] += count_[*it];
  }

  preorder_ = std::move(preorder);
  symmetric_ = same_shape_at_every_depth(*this, preorder_);
  hash_.set(content_hash(*this, preorder_));
}

uint64_t Topology::hash() const {
  if (const auto known = hash_.get()) return *known;
  const uint64_t value = content_hash(*this, preorder_);
  hash_.set(value);
  return value;
}

Topology::UplinkUndo Topology::set_uplinks(std::span<const UplinkChange> changes) {
  // Check everything first, so that a bad change leaves the topology as it was.
  for (const UplinkChange& change : changes) {
    if (change.node < 0 || change.node >= num_nodes())
      throw TopologyError(fmt::format("node {}", change.node),
                          fmt::format("no such node (the topology has {})", num_nodes()));
    if (change.node == root())
      throw TopologyError(full_name(root()), "the root has no uplink to set");
    check_link([&] { return full_name(change.node); }, change.link);
  }
  UplinkUndo undo;
  undo.previous.reserve(changes.size());
  undo.hash_before = hash_.get();
  undo.symmetric_before = symmetric_;
  for (const UplinkChange& change : changes) undo.previous.push_back({change.node, uplink(change.node)});
  for (const UplinkChange& change : changes) put_uplink(change.node, change.link);
  symmetric_ = same_shape_at_every_depth(*this, preorder_);
  hash_.forget();
  undo.topology = this;
  undo.edit = ++edits_;
  return undo;
}

Topology::UplinkUndo Topology::set_uplink(NodeId node, const Link& link) {
  const UplinkChange change{node, link};
  return set_uplinks(std::span<const UplinkChange>(&change, 1));
}

void Topology::undo(const UplinkUndo& undo) {
  if (undo.topology != this || undo.edit != edits_)
    throw std::logic_error("Topology::undo: not the latest change to this topology");
  for (const UplinkChange& change : undo.previous) put_uplink(change.node, change.link);
  if (undo.hash_before)
    hash_.set(*undo.hash_before);
  else
    hash_.forget();
  symmetric_ = undo.symmetric_before;
  --edits_;
}

void Topology::put_uplink(NodeId node, const Link& link) {
  // The node and the edge from its parent (its only in-edge) both hold the figures.
  graph_[node].link = link;
  for (auto [e, end] = boost::in_edges(node, graph_); e != end; ++e) graph_[*e] = link;
}

std::string Topology::full_name(NodeId n) const {
  // The root's parent is -1; index() sets a node's parent before anything asks for its name.
  size_t bytes = 0;
  for (NodeId v = n; v >= 0; v = parent_[v]) bytes += graph_[v].name.size() + 1;
  std::string out(bytes - 1, '/');
  size_t end = out.size();
  for (NodeId v = n; v >= 0; v = parent_[v]) {
    const std::string& name = graph_[v].name;
    end -= name.size();
    out.replace(end, name.size(), name);
    if (end > 0) --end;  // the '/' before it
  }
  return out;
}

std::vector<std::string> Topology::learner_names() const {
  std::vector<std::string> names;
  names.reserve(learner_node_.size());
  for (const NodeId node : learner_node_) names.push_back(full_name(node));
  return names;
}

std::span<const int> Topology::learners_under(NodeId n) const {
  return std::span<const int>(dfs_ranks_).subspan(first_[n], count_[n]);
}

namespace {
void check_rank(int rank, int learners) {
  if (rank < 0 || rank >= learners)
    throw std::out_of_range(fmt::format("rank {} is outside 0..{}", rank, learners - 1));
}
}  // namespace

NodeId Topology::lca(int rank_a, int rank_b) const {
  check_rank(rank_a, num_learners());
  check_rank(rank_b, num_learners());
  NodeId a = learner_node_[rank_a];
  NodeId b = learner_node_[rank_b];
  while (depth_[a] > depth_[b]) a = parent_[a];
  while (depth_[b] > depth_[a]) b = parent_[b];
  while (a != b) a = parent_[a], b = parent_[b];
  return a;
}

Topology::Route Topology::route(int rank_a, int rank_b) const {
  const NodeId meet = lca(rank_a, rank_b);
  Route route;
  for (NodeId v = learner_node_[rank_a]; v != meet; v = parent_[v]) route.up.push_back(v);
  for (NodeId v = learner_node_[rank_b]; v != meet; v = parent_[v]) route.down.push_back(v);
  std::reverse(route.down.begin(), route.down.end());
  return route;
}

double Topology::path_latency(int rank_a, int rank_b) const {
  check_rank(rank_a, num_learners());
  check_rank(rank_b, num_learners());
  // Climb from the deeper end until both meet at the LCA, summing the uplinks left behind;
  // no allocation, as the closed forms ask this once per ring hop.
  NodeId a = learner_node_[rank_a];
  NodeId b = learner_node_[rank_b];
  double total = 0;
  while (a != b) {
    NodeId& deeper = depth_[a] >= depth_[b] ? a : b;
    total += uplink(deeper).latency;
    deeper = parent_[deeper];
  }
  return total;
}

void Topology::set_reduce_bandwidth(double rate) {
  if (!(rate >= 0) || !std::isfinite(rate))
    throw TopologyError("reduce_bandwidth",
                        fmt::format("must be positive and finite (or 0 for none), got {}", rate));
  reduce_bandwidth_ = rate;
  hash_.forget();
}

void Topology::set_hop_overhead(std::optional<double> seconds) {
  if (seconds && (!std::isfinite(*seconds) || *seconds < 0 || *seconds > kMaxHopOverhead))
    throw TopologyError("hop_overhead", fmt::format("must be from 0 to {} s per hop, got {} s", kMaxHopOverhead, *seconds));
  hop_overhead_ = seconds;
  hash_.forget();
}

std::string Topology::hash_hex() const { return fmt::format("{:016x}", hash()); }

}  // namespace flexplan
