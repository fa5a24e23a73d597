// The bandwidth and latency floors of an all-reduce on a tree (floor.hpp).
#include "planner/floor.hpp"

#include <algorithm>

#include <fmt/core.h>

namespace flexplan {

bool separates_learners(const Topology& topo, NodeId n) {
  const size_t below = topo.learners_under(n).size();
  return n != topo.root() && below > 0 && below < static_cast<size_t>(topo.num_learners());
}

GroupCuts group_cuts(const Topology& topo) {
  GroupCuts cuts;
  cuts.below.assign(static_cast<size_t>(topo.num_nodes()), 0);
  cuts.above.assign(static_cast<size_t>(topo.num_nodes()), 0);
  for (int learner = 0; learner < topo.num_learners(); ++learner) {
    const NodeId n = topo.learner_node(learner);
    cuts.below[static_cast<size_t>(n)] = topo.uplink(n).bandwidth;
  }
  // Bottom up: a switch's learners are cut off by its uplink, or by cutting each child's.
  std::vector<double> children_sum(static_cast<size_t>(topo.num_nodes()), 0);
  for (int level = 0; level < topo.num_levels(); ++level)
    for (NodeId n : topo.nodes_at_level(level)) {
      for (NodeId c : topo.children(n)) children_sum[static_cast<size_t>(n)] += cuts.below[static_cast<size_t>(c)];
      cuts.below[static_cast<size_t>(n)] =
          n == topo.root() ? children_sum[static_cast<size_t>(n)]
                           : std::min(topo.uplink(n).bandwidth, children_sum[static_cast<size_t>(n)]);
    }
  // Top down: the learners outside switch n are cut off from it by its uplink, or at its parent
  // by cutting the parent's other children and what lies outside the parent.
  for (int level = topo.num_levels() - 1; level-- > 0;)
    for (NodeId n : topo.nodes_at_level(level)) {
      const NodeId p = topo.parent(n);
      const double at_parent = cuts.above[static_cast<size_t>(p)] + children_sum[static_cast<size_t>(p)] -
                               cuts.below[static_cast<size_t>(n)];
      cuts.above[static_cast<size_t>(n)] = std::min(topo.uplink(n).bandwidth, at_parent);
    }
  return cuts;
}

CostFloor cost_floor(const Topology& topo) {
  CostFloor floor;
  const int learners = topo.num_learners();
  if (learners < 2) return floor;
  const GroupCuts cuts = group_cuts(topo);
  const auto raise = [&](double per_byte, auto describe) {
    if (per_byte > floor.per_byte) {
      floor.per_byte = per_byte;
      floor.bound_by = describe();
    }
  };
  for (NodeId n = 0; n < topo.num_nodes(); ++n) {
    if (separates_learners(topo, n)) {
      raise(1 / topo.uplink(n).bandwidth,
            [&] { return fmt::format("the link above '{}'", topo.full_name(n)); });
      floor.per_byte_own_uplinks = std::max(floor.per_byte_own_uplinks, 1 / topo.uplink(n).bandwidth);
    }
    if (topo.is_learner(n)) continue;
    int groups = topo.degree(n);
    double bandwidth = 0, own_uplinks = 0;
    for (NodeId child : topo.children(n)) {
      bandwidth += cuts.below[static_cast<size_t>(child)];
      own_uplinks += topo.uplink(child).bandwidth;
    }
    if (separates_learners(topo, n)) {
      ++groups;
      bandwidth += cuts.above[static_cast<size_t>(n)];
      own_uplinks += topo.uplink(n).bandwidth;
    }
    if (groups < 2) continue;
    raise(2.0 * (groups - 1) / bandwidth, [&] {
      return fmt::format("branch '{}' ({} groups)",
                         n == topo.root() ? std::string("root") : topo.full_name(n), groups);
    });
    floor.per_byte_own_uplinks = std::max(floor.per_byte_own_uplinks, 2.0 * (groups - 1) / own_uplinks);
  }

  // Diameter: at every branch, the two children with the farthest learners below them.
  std::vector<double> deepest(topo.num_nodes(), 0);  // latency from n down to its farthest learner
  std::vector<int> deepest_rank(topo.num_nodes(), -1);
  for (int level = 0; level < topo.num_levels(); ++level) {
    for (NodeId n : topo.nodes_at_level(level)) {
      double first = -1, second = -1;
      int first_rank = -1, second_rank = -1;
      for (NodeId child : topo.children(n)) {
        const double down = (topo.is_learner(child) ? 0 : deepest[child]) + topo.uplink(child).latency;
        const int rank = topo.is_learner(child) ? topo.rank_of(child) : deepest_rank[child];
        if (down > first) {
          second = first, second_rank = first_rank;
          first = down, first_rank = rank;
        } else if (down > second) {
          second = down, second_rank = rank;
        }
      }
      deepest[n] = first;
      deepest_rank[n] = first_rank;
      if (second >= 0 && first + second > floor.latency) {
        floor.latency = first + second;
        floor.latency_from = first_rank;
        floor.latency_to = second_rank;
      }
    }
  }
  return floor;
}

}  // namespace flexplan
