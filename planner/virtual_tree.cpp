// Virtual trees (virtual_tree.hpp).
#include "planner/virtual_tree.hpp"

#include <algorithm>

namespace flexplan {

bool passes_through(const Topology& topo, const std::vector<char>& transparent, NodeId n) {
  if (n == topo.root() || topo.is_learner(n)) return false;
  return transparent[static_cast<size_t>(n)] != 0 || topo.degree(n) < 2;
}

VirtualTree::VirtualTree(const Topology& topo, const std::vector<char>& transparent)
    : parent_(topo.num_nodes(), kInactive),
      children_(topo.num_nodes()),
      ancestors_(topo.num_nodes()),
      level_(topo.num_nodes(), -1),
      learners_(topo.num_nodes()) {
  // Top down in depth-first order, so that every node's nearest active ancestor is known when
  // the node is reached.
  std::vector<NodeId> nearest_active(topo.num_nodes(), -1);
  std::vector<NodeId> stack{topo.root()};
  std::vector<NodeId> top_down;
  while (!stack.empty()) {
    const NodeId n = stack.back();
    stack.pop_back();
    top_down.push_back(n);
    const bool is_active = passes_through(topo, transparent, n) == false;
    if (is_active) {
      const NodeId up = n == topo.root() ? -1 : nearest_active[topo.parent(n)];
      parent_[n] = up;
      if (up >= 0) {
        children_[up].push_back(n);
        ancestors_[n].push_back(up);
        ancestors_[n].insert(ancestors_[n].end(), ancestors_[up].begin(), ancestors_[up].end());
      }
    }
    nearest_active[n] = is_active ? n : nearest_active[topo.parent(n)];
    const auto kids = topo.children(n);
    for (auto it = kids.rbegin(); it != kids.rend(); ++it) stack.push_back(*it);
  }
  for (auto it = top_down.rbegin(); it != top_down.rend(); ++it) {
    const NodeId n = *it;
    if (!active(n)) continue;
    bottom_up_.push_back(n);
    if (topo.is_learner(n)) {
      learners_[n] = {topo.rank_of(n)};
      continue;
    }
    for (NodeId child : children_[n]) {
      level_[n] = std::max(level_[n], level_[child] + 1);
      learners_[n].insert(learners_[n].end(), learners_[child].begin(), learners_[child].end());
    }
  }
}

std::vector<NodeId> VirtualTree::uplink_path(const Topology& topo, NodeId n) const {
  std::vector<NodeId> path;
  for (NodeId at = n; at != parent_[n]; at = topo.parent(at)) path.push_back(at);
  return path;
}

}  // namespace flexplan
