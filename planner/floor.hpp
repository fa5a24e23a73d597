// Lower bounds that every all-reduce obeys on a tree (docs/cost-model.md derives them): the
// bandwidth floor, whichever of these is largest,
//   - n / w for every link that separates learners (n bytes must cross it each way), and
//   - 2 (M - 1) n / (sum of the groups' link bandwidths) at every branch node with M >= 2
//     groups (its children, plus the rest of the tree behind its uplink when that holds
//     learners): combining and redistributing every item across M groups takes 2 (M - 1)
//     transfers, each leaving one group through its link and entering another through its.
//     A group's link bandwidth is what it can send towards the branch node at most: the minimum
//     cut between its learners and the node (group_cuts), which is less than its uplink where
//     slower links lie beyond it (a switch of one child above a slow learner link, or a rest of
//     the tree whose learners all sit behind slow links);
// and the latency floor, the diameter latency: the largest one-way path latency between two
// learners, which some learner's contribution must cross to reach another.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "topology/topology.hpp"

namespace flexplan {

// A link separates learners when it has learners on both sides: only those carry all-reduce
// traffic in every algorithm.
bool separates_learners(const Topology&, NodeId n);

// What a group can send towards a branch node per second: the least total bandwidth of links
// whose removal cuts every learner of the group off from that node (a minimum cut; on a tree,
// a node's learners are cut off by its uplink or by cutting each child's learners off).
struct GroupCuts {
  // By node: its learners cut off from its parent (for the root, from nothing: the sum of its
  // children's cuts, unused).
  std::vector<double> below;
  // By switch: the learners outside its subtree cut off from it, by its uplink or at its parent
  // (the parent's other children and what lies outside the parent); 0 for the root.
  std::vector<double> above;
};
GroupCuts group_cuts(const Topology&);

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
