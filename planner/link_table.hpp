// The tree's links as flat arrays, and a hop's walk over them, shared by the pipeline pricer
// (pipeline.hpp) and the critical path (critical_path.hpp), whose prices must agree bit for bit
// with each other's and the evaluator's: one construction and one walk keep them so.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <vector>

#include <fmt/core.h>

#include "planner/cost_model.hpp"
#include "topology/topology.hpp"

namespace flexplan {

// Link directions are numbered 2n (up the link above node n) and 2n + 1 (down it); a learner's
// reductions are one more resource, "direction" 2N + n (cost_model.hpp), N the node count.
struct LinkTable {
  std::vector<NodeId> parent;
  std::vector<int> depth;
  std::vector<double> latency;            // of each node's uplink
  std::vector<double> inverse_bandwidth;  // by direction; reductions' where reduce_bandwidth > 0
  uint32_t nodes = 0;

  // Throws std::invalid_argument naming a link without bandwidth.
  LinkTable(const Topology& topo, double reduce_bandwidth)
      : parent(topo.num_nodes()),
        depth(topo.num_nodes()),
        latency(topo.num_nodes(), 0),
        inverse_bandwidth(3 * static_cast<size_t>(topo.num_nodes()), 0),
        nodes(static_cast<uint32_t>(topo.num_nodes())) {
    for (NodeId n = 0; n < topo.num_nodes(); ++n) {
      parent[n] = topo.parent(n);
      depth[n] = topo.depth(n);
      if (n == topo.root()) continue;
      const double bandwidth = topo.uplink(n).bandwidth;
      if (!(bandwidth > 0))
        throw std::invalid_argument(fmt::format("link above '{}' has no bandwidth", topo.full_name(n)));
      inverse_bandwidth[2 * n] = inverse_bandwidth[2 * n + 1] = 1 / bandwidth;
      latency[n] = topo.uplink(n).latency;
    }
    if (reduce_bandwidth > 0)
      for (NodeId n = 0; n < topo.num_nodes(); ++n) inverse_bandwidth[reduction_of(n)] = 1 / reduce_bandwidth;
  }

  uint32_t reduction_of(NodeId n) const { return 2 * nodes + static_cast<uint32_t>(n); }

  // A hop's one walk up from a and down to b: add(direction, load) for each link direction on
  // the path, the load `share` times its star's incast factor on the root's side (StarIncast);
  // returns the path's latency.
  template <class Add>
  double walk(NodeId a, NodeId b, double share, const StarIncast& incast, Add&& add) const {
    const bool from_root = incast.root == a, to_root = incast.root == b;
    double sum = 0;
    while (a != b) {
      if (depth[a] >= depth[b]) {
        add(2 * static_cast<uint32_t>(a), from_root ? share * incast.at(a, depth[a]) : share);
        sum += latency[a];
        a = parent[a];
      } else {
        add(2 * static_cast<uint32_t>(b) + 1, to_root ? share * incast.at(b, depth[b]) : share);
        sum += latency[b];
        b = parent[b];
      }
    }
    return sum;
  }
};

}  // namespace flexplan
