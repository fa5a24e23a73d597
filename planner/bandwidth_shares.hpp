// The shares of bandwidth-aware FlexReduce ("flexreduce-bw"; docs/planner.md derives them).
//
// The schedule reduces level by level up a virtual tree (virtual_tree.hpp): at each branch a,
// every item gets a new owner among its holders in a's children (one holder per child: the
// learner that owns it after that child's own step), and the other holders send it their
// partial sums directly (a star op); the all-gather mirrors it. A learner's range only shrinks
// going up (it owns a part of what it held). With the reduce-scatter of one slice overlapped
// with the all-gather of another, both directions of a link carry the same load, which for the
// link above active node u (and above the transparent switches between u and its virtual
// parent) is, as a fraction of the vector,
//   L_u = 1 - x_u(root) + sum over u's virtual ancestors a of (k_a - 1) x_u(a),
// where x_u(a) is what u's subtree holds after a's step and k_a the number of a's virtual
// children: u sends away once whatever it gives up, and receives k_a - 1 partial sums of
// every item it keeps at a.
//
// The shares x are the solution of a linear program that minimises the busiest link's
// load / bandwidth, with the vector split among several virtual trees of the topology (the
// tree itself, every switch alone made transparent where that might help, and the flat tree):
// a rack whose uplink is faster than its machines' can pass their data up uncombined. On most
// random trees of bench/planning the optimum meets the floor of floor.hpp. The LP is solved by
// column generation over the virtual trees (bandwidth_shares.cpp): the tree itself first, other
// trees only when the link duals say they lower the optimum, and when none of those offered
// does, the switches just above the links the duals price, made transparent.
#pragma once

#include <cstdint>
#include <vector>

#include "topology/topology.hpp"

namespace flexplan {

struct ShareClass {
  std::vector<char> transparent;  // by node
  double weight = 0;              // the fraction of the vector this virtual tree serves
  // held[u][j]: the fraction of this class's range that active node u's subtree holds after
  // the step of its j-th virtual ancestor (j = 0: its virtual parent); empty for the root and
  // inactive nodes.
  std::vector<std::vector<double>> held;
};

struct BandwidthShares {
  // The LP optimum: seconds per message byte on the busiest link direction, reduce-scatter and
  // all-gather overlapped.
  double per_byte = 0;
  std::vector<ShareClass> classes;  // those with a weight above zero
};

// How the LP is solved: by column generation over the candidate virtual trees (the planner's
// way), or with every candidate in one LP. Both reach the same optimum (a unit test compares
// them); column generation usually solves one LP the size of the tree alone.
enum class ShareSolve { column_generation, all_trees };
// `incast_loss` (CostParams::incast_loss): the partial sums that two or more children send at
// once to a star's root count 1 + loss times on every link between the root and the branch but
// the root learner's own, as the pricers count them (StarIncast).
BandwidthShares bandwidth_shares(const Topology&, ShareSolve = ShareSolve::column_generation, double incast_loss = 0);

// The share LP's size limits. Its solving time grows faster than linearly with its columns
// (one per orbit, virtual tree and ancestor, plus one per tree). The first LP solved holds the
// tree itself alone, machines' learners out: tree_lp_columns counts it, and the planner leaves
// flexreduce-bw out beyond kMaxTreeLpColumns (algorithm_table.cpp; a 128k-learner tree's takes
// CLP about 2 s). Other virtual trees (the flat tree, switches made transparent) are offered
// only while they and the tree itself stay within kMaxShareLpColumns, counted with learners in:
// that also bounds how many pieces the schedule cuts the vector into.
uint64_t tree_lp_columns(const Topology&);
inline constexpr uint64_t kMaxTreeLpColumns = 64'000;
inline constexpr uint64_t kMaxShareLpColumns = 20'000;

}  // namespace flexplan
