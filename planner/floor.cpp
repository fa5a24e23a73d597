// The bandwidth and latency floors of an all-reduce on a tree (floor.hpp).
#include "planner/floor.hpp"

#include <algorithm>

#include <fmt/core.h>

namespace flexplan {

bool separates_learners(const Topology& topo, NodeId n) {
  const size_t below = topo.learners_under(n).size();
  return n != topo.root() && below > 0 && below < static_cast<size_t>(topo.num_learners());
}

double below_bottleneck(const Topology& topo, NodeId c) {
  double bandwidth = topo.uplink(c).bandwidth;
  while (!topo.is_learner(c) && topo.degree(c) == 1) {
    c = topo.children(c).front();
    bandwidth = std::min(bandwidth, topo.uplink(c).bandwidth);
  }
  return bandwidth;
}

double above_bottleneck(const Topology& topo, NodeId n) {
  double bandwidth = topo.uplink(n).bandwidth;
  for (NodeId at = topo.parent(n); at != topo.root() && topo.degree(at) == 1; at = topo.parent(at))
    bandwidth = std::min(bandwidth, topo.uplink(at).bandwidth);
  return bandwidth;
}

CostFloor cost_floor(const Topology& topo) {
  CostFloor floor;
  const int learners = topo.num_learners();
  if (learners < 2) return floor;
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
      bandwidth += below_bottleneck(topo, child);
      own_uplinks += topo.uplink(child).bandwidth;
    }
    if (separates_learners(topo, n)) {
      ++groups;
      bandwidth += above_bottleneck(topo, n);
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
