// A virtual tree: the topology with some switches made transparent. A transparent switch does
// not combine its subtree's data before passing it up: its children hang from its nearest
// non-transparent ancestor instead, and their data crosses its uplink separately. The
// bandwidth-aware planner mixes several virtual trees of one topology (bandwidth_shares.hpp).
#pragma once

#include <span>
#include <vector>

#include "topology/topology.hpp"

namespace flexplan {

// Whether switch n is inactive in the virtual tree `transparent` describes: made transparent, or
// a switch with one child, which combines nothing (its child's data crosses its uplink as it is)
// and so never needs a step of its own. Keeping such a switch active would also make its
// child's transparency useless: the grandchildren would hang from it and combine there.
bool passes_through(const Topology&, const std::vector<char>& transparent, NodeId n);

class VirtualTree {
 public:
  // `transparent[n]` for every node; the root and learners are never transparent, switches of
  // one child always are (passes_through).
  VirtualTree(const Topology&, const std::vector<char>& transparent);

  bool active(NodeId n) const { return parent_[n] != kInactive; }
  NodeId parent(NodeId n) const { return parent_[n]; }  // -1 for the root
  std::span<const NodeId> children(NodeId n) const {
    return {children_.data() + children_from_[n], children_.data() + children_from_[n + 1]};
  }
  // Virtual ancestors of an active node: its virtual parent first, the root last.
  std::span<const NodeId> ancestors(NodeId n) const {
    return {ancestors_.data() + ancestors_from_[n], ancestors_.data() + ancestors_from_[n + 1]};
  }
  // Active nodes, children before parents.
  const std::vector<NodeId>& bottom_up() const { return bottom_up_; }
  // Learners have level -1, a branch one more than its highest child.
  int level(NodeId n) const { return level_[n]; }
  int levels() const { return level_[0] + 1; }
  // Learner ranks under an active node, in depth-first order: the physical node's, since
  // every learner is active and hangs below each of its active ancestors.
  std::span<const int> learners_under(NodeId n) const { return topo_->learners_under(n); }
  // The physical nodes whose uplinks an active node's data crosses to reach its virtual parent:
  // the node itself and the transparent switches above it.
  std::vector<NodeId> uplink_path(const Topology&, NodeId n) const;

 private:
  static constexpr NodeId kInactive = -2;
  const Topology* topo_;
  std::vector<NodeId> parent_;
  // Every node's children, and its ancestors, in one array each, node n's from
  // children_from_[n] to children_from_[n + 1] (ancestors_ likewise): a vector per node cost
  // a deep tree of a million learners hundreds of megabytes and millions of allocations for
  // each virtual tree, and the share LP builds a dozen of them.
  std::vector<NodeId> children_;
  std::vector<size_t> children_from_;
  std::vector<NodeId> ancestors_;
  std::vector<size_t> ancestors_from_;
  std::vector<NodeId> bottom_up_;
  std::vector<int> level_;
};

}  // namespace flexplan
