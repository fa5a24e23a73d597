// Lower bounds that every all-reduce obeys on a tree (docs/cost-model.md derives them): the
// bandwidth floor, whichever of these is largest,
//   - n / w for every link that separates learners (n bytes must cross it each way), and
//   - 2 (M - 1) n / (sum of the groups' link bandwidths) at every branch node with M >= 2
//     groups (its children, plus the rest of the tree behind its uplink when that holds
//     learners): combining and redistributing every item across M groups takes 2 (M - 1)
//     transfers, each leaving one group through its link and entering another through its.
//     A group's link is the slowest one between it and the branch node: switches of a single
//     child put their uplinks on the group's only way out too;
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

// The slowest link between a subtree and the rest when switches of one child lie in between:
// below_bottleneck(c) is the slowest of c's uplink and the uplinks under it down to the first
// node of two or more children; above_bottleneck(n), for an n that separates learners, the
// slowest of n's uplink and its ancestors' up to the first one with another child.
double below_bottleneck(const Topology&, NodeId c);
double above_bottleneck(const Topology&, NodeId n);

struct CostFloor {
  double per_byte = 0;        // bandwidth floor, seconds per message byte
  // The same floor with each group's own uplink in the branch term, not the slowest link on its
  // way out: the weaker bound the floor started as, kept so that results can be compared with
  // figures measured against it (bench/planning/plan_quality.cpp). Never above per_byte.
  double per_byte_own_uplinks = 0;
  std::string bound_by;       // what sets it: "the link above 'a/b'", "branch 'a' (3 groups)"
  double latency = 0;         // diameter latency, seconds
  int latency_from = -1, latency_to = -1;  // the two learners at that distance (ranks)
  double at(double bytes) const { return std::max(per_byte * bytes, latency); }
};

CostFloor cost_floor(const Topology&);

}  // namespace flexplan
