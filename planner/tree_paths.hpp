// Walking the tree path between two nodes without allocating: the cost model routes millions
// of hops. Visits the same uplinks as Topology::route, in the same roles.
#pragma once

#include "planner/topology.hpp"

namespace flexplan {

// Calls up(n) for every node whose uplink the path from `a` to `b` climbs, and down(n) for
// every node whose uplink it descends.
template <class Up, class Down>
void walk_path(const Topology& topo, NodeId a, NodeId b, Up&& up, Down&& down) {
  while (topo.depth(a) > topo.depth(b)) {
    up(a);
    a = topo.parent(a);
  }
  while (topo.depth(b) > topo.depth(a)) {
    down(b);
    b = topo.parent(b);
  }
  while (a != b) {
    up(a);
    down(b);
    a = topo.parent(a);
    b = topo.parent(b);
  }
}

inline double path_latency_between(const Topology& topo, NodeId a, NodeId b) {
  double latency = 0;
  const auto add = [&](NodeId n) { latency += topo.uplink(n).latency; };
  walk_path(topo, a, b, add, add);
  return latency;
}

}  // namespace flexplan
