// Virtual trees (virtual_tree.hpp).
#include "planner/virtual_tree.hpp"

#include <algorithm>

namespace flexplan {

bool passes_through(const Topology& topo, const std::vector<char>& transparent, NodeId n) {
  if (n == topo.root() || topo.is_learner(n)) return false;
  return transparent[static_cast<size_t>(n)] != 0 || topo.degree(n) < 2;
}

VirtualTree::VirtualTree(const Topology& topo, const std::vector<char>& transparent)
    : topo_(&topo), parent_(topo.num_nodes(), kInactive), level_(topo.num_nodes(), -1) {
  const auto nodes = static_cast<size_t>(topo.num_nodes());
  // Top down in depth-first order, so that every node's nearest active ancestor is known when
  // the node is reached. Node ids need not be in preorder, so children and ancestors are
  // counted first (an active node has one ancestor more than its virtual parent), then written.
  std::vector<NodeId> nearest_active(nodes, -1);
  std::vector<uint32_t> ancestor_count(nodes, 0), child_count(nodes, 0);
  std::vector<NodeId> stack{topo.root()};
  std::vector<NodeId> top_down;
  top_down.reserve(nodes);
  while (!stack.empty()) {
    const NodeId n = stack.back();
    stack.pop_back();
    top_down.push_back(n);
    const bool is_active = passes_through(topo, transparent, n) == false;
    if (is_active) {
      const NodeId up = n == topo.root() ? -1 : nearest_active[topo.parent(n)];
      parent_[n] = up;
      if (up >= 0) {
        ++child_count[up];
        ancestor_count[n] = ancestor_count[up] + 1;
      }
    }
    nearest_active[n] = is_active ? n : nearest_active[topo.parent(n)];
    const auto kids = topo.children(n);
    for (auto it = kids.rbegin(); it != kids.rend(); ++it) stack.push_back(*it);
  }
  children_from_.assign(nodes + 1, 0);
  ancestors_from_.assign(nodes + 1, 0);
  for (size_t n = 0; n < nodes; ++n) {
    children_from_[n + 1] = children_from_[n] + child_count[n];
    ancestors_from_[n + 1] = ancestors_from_[n] + ancestor_count[n];
  }
  children_.resize(children_from_[nodes]);
  ancestors_.resize(ancestors_from_[nodes]);
  std::fill(child_count.begin(), child_count.end(), 0);  // now: children written so far
  for (const NodeId n : top_down) {  // a parent's ancestors are written before its children's
    if (!active(n) || parent_[n] < 0) continue;
    const NodeId up = parent_[n];
    children_[children_from_[up] + child_count[up]++] = n;  // in depth-first order
    NodeId* out = ancestors_.data() + ancestors_from_[n];
    *out++ = up;
    std::copy(ancestors_.data() + ancestors_from_[up], ancestors_.data() + ancestors_from_[up + 1], out);
  }
  for (auto it = top_down.rbegin(); it != top_down.rend(); ++it) {
    const NodeId n = *it;
    if (!active(n)) continue;
    bottom_up_.push_back(n);
    for (NodeId child : children(n)) level_[n] = std::max(level_[n], level_[child] + 1);
  }
}

std::vector<NodeId> VirtualTree::uplink_path(const Topology& topo, NodeId n) const {
  std::vector<NodeId> path;
  for (NodeId at = n; at != parent_[n]; at = topo.parent(at)) path.push_back(at);
  return path;
}

}  // namespace flexplan
