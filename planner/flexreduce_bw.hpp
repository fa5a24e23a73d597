// Bandwidth-aware FlexReduce: the shares of the vector come from the link bandwidths as well
// as the learner counts (docs/planner.md, "flexreduce-bw", derives it).
//
// Every item of the vector is reduced along one chain through all learners, from a first
// learner f to its owner o, in an order that walks the tree: the chain crosses every link on
// the path between f and o once and every other link twice (in and out). The all-gather sends
// the item back along the reversed chain. Counting both phases, a link e then carries
// (2 - c_e) n bytes each way, where c_e is the fraction of items whose f-o path crosses e.
// The shares choose, per learner, the mass pi of item endpoints it is (owner of pi/2 of the
// vector, first learner of another pi/2), and the endpoints are paired through a weighted
// centroid of the tree, which makes every c_e as large as the masses allow:
// c_e = min(E_e, 2 - E_e) with E_e the endpoint mass below e. A small LP, solved exactly by
// bisection on the time over interval feasibility bottom-up, picks the masses that minimise
// max_e (2 - c_e) / w_e; that is the schedule's bandwidth term in the chain model, and it meets
// the floor of floor.hpp on stars and wherever branch groups are not starved.
#pragma once

#include <vector>

#include "ir/plan.hpp"
#include "topology/topology.hpp"

namespace flexplan {

struct BandwidthShares {
  // Seconds per message byte of the busiest link over both phases, max_e (2 - c_e) / w_e.
  double per_byte = 0;
  std::vector<double> endpoint_mass;  // pi per rank; the masses sum to 2
  NodeId centroid = 0;                // every branch around it holds at most half the mass
};
BandwidthShares bandwidth_shares(const Topology&);

// The learners in the order a chain from `first` to `last` visits them: `first`, then every
// subtree hanging off the path between them as the path passes it (depth-first inside), then
// `last`.
std::vector<int32_t> tree_walk(const Topology&, int32_t first, int32_t last);

}  // namespace flexplan
