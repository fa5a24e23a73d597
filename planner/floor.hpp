// Lower bounds that every all-reduce obeys on a tree (docs/cost-model.md derives them): the
// bandwidth floor, whichever of these is largest,
//   - n / w for every link that separates learners (n bytes must cross it each way), and
//   - 2 (M - 1) n / (sum of the groups' link bandwidths) at every branch node with M >= 2
//     groups (its children, plus the rest of the tree behind its uplink when that holds
//     learners): combining and redistributing every item across M groups takes 2 (M - 1)
//     transfers, each leaving one group through its link and entering another through its;
// and the latency floor, the diameter latency: the largest one-way path latency between two
// learners, which some learner's contribution must cross to reach another.
#pragma once

#include <algorithm>
#include <string>

#include "topology/topology.hpp"

namespace flexplan {

// A link separates learners when it has learners on both sides: only those carry all-reduce
// traffic in every algorithm.
bool separates_learners(const Topology&, NodeId n);

struct CostFloor {
  double per_byte = 0;        // bandwidth floor, seconds per message byte
  std::string bound_by;       // what sets it: "the link above 'a/b'", "branch 'a' (3 groups)"
  double latency = 0;         // diameter latency, seconds
  int latency_from = -1, latency_to = -1;  // the two learners at that distance (ranks)
  double at(double bytes) const { return std::max(per_byte * bytes, latency); }
};

CostFloor cost_floor(const Topology&);

}  // namespace flexplan
