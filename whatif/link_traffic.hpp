// How many bytes each link carries, per message byte, under a schedule: the per-link traffic
// behind the bottleneck report. Indexed by the node whose uplink it is; up is toward the root.
#pragma once

#include <vector>

#include "ir/plan.hpp"
#include "topology/topology.hpp"

namespace flexplan::whatif {

struct LinkTraffic {
  std::vector<double> up, down;  // per node; the root's entries stay 0
};

// Walks every hop of every op (codegen::lower_op, the hops the runtime runs and the cost model
// prices) along its route through the tree.
LinkTraffic schedule_traffic(const Topology&, const ir::Schedule&);

// The same for the ring (plan_ring: 2 (P - 1) steps, each learner passing n / P to the next in
// depth-first order) without building its 2 P (P - 1) ops.
LinkTraffic ring_traffic(const Topology&);

}  // namespace flexplan::whatif
