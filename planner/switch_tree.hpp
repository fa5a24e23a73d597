// The switch tree's builder (switch_tree.cpp): an all-reduce tree whose levels follow the
// topology's switches, rooted at the tree's centre, for mid-size messages.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/plan.hpp"
#include "planner/algorithms.hpp"
#include "topology/topology.hpp"

namespace flexplan {

// Reduce up a tree that follows the topology, broadcast down the same tree (docs/planner.md,
// "Latency algorithms"): the topology is taken as rooted at its centre node (least eccentricity
// in links); at every node the roots of the subtrees hanging from it (and the node itself if it
// is a learner) meet, and the one that would take a 64 KiB star cheapest is the subtree's root:
// the others' data into its link, the farthest of them, and the sum carried on over its own
// path. The others reach it in a heap of fan-out `fanout` (0: one star), cheapest first.
// `trees` 2: two such trees, each on half the units, the second rooted at each node's
// second-cheapest member where there is one, so that the stars' incast falls on two learners.
// `exchange_at_centre`: the members meeting at the centre node exchange directly (each reduces
// all of them, as `direct`), so the sum crosses the top once instead of up to one root and back.
// How each node's root is chosen (`roots`):
// - ByPrice: the member the 64 KiB star estimate above prices cheapest.
// - ByShape: from the tree's shape alone, never its link figures: the member whose sum is ready
//   last in steps (the deepest subtree, so that no chain takes a hop more), then the one heading
//   the most learners, then the lower rank; the second tree takes the second in that order.
// A tree rooted by the shape is the same schedule whatever the links' bandwidths. Not raced:
// raced beside the trees rooted by price it removed some upgrades predicted slower and added
// none, but the critical path prices one of its schedules 0.71 us dearer after a latency
// quartered (docs/whatif.md, "Roots that read no link, raced beside").
enum class SwitchRoots { ByPrice, ByShape };

struct SwitchTreeShape {
  uint32_t fanout = 0;
  uint32_t trees = 1;
  bool exchange_at_centre = false;
  SwitchRoots roots = SwitchRoots::ByPrice;
  // Members meeting at a switch that all sit behind links narrower than the switch's way
  // towards the centre meet one level up instead (ByPrice only): the narrow links then carry
  // only their own subtree's sum up and the result down.
  bool lift_narrow = false;
  // The trees take turns: at a node where members meet, tree t's root is the side (a member,
  // or, below the centre, the way towards it, the members then meeting one level up, each
  // carrying its own sum) that leaves the busiest link their hops cross least loaded per byte,
  // counting what the other trees put on every link (in two passes: trees 0..t-1 first, then
  // all the others). With three trees a switch of two members and
  // an uplink of equal width has each of its links carry 4/3 of the message each way, the
  // floor's 2(M - 1)/M, where one tree puts 2 on its root's link and two trees 1.5 on one of
  // them (ByPrice only).
  bool rotate_sides = false;
  // The members meeting at a node reach its root in a tree fitted to their links instead of a
  // heap of fan-out `fanout`: widest link first, each under the member whose link would then
  // carry least per byte (its children's sums and its own), so that a 25 GB/s member takes
  // seven where a 3 GB/s one takes none (ByPrice only).
  bool fit_fanout = false;
};
ir::Schedule plan_switch_tree(const Topology&, const SwitchTreeShape&);

// A broadcast from `root` down the switch tree taken as rooted at the root's switch: at every
// node the members meeting there get the data from the one the 64 KiB estimate prices cheapest
// (at the root's switch, from the root itself), in one star ("switch-tree", fanout 0), a
// binary heap (2, "switch-binary-tree") or a chain (1, "switch-chain-tree": every member's link
// carries the message once each way), one level after another; pipelined (@S) its slices
// follow each other down. Its transpose is the reduce to `root`.
ir::Schedule plan_switch_tree_broadcast(const Topology&, int32_t root, uint32_t fanout = 0);

// The node of least eccentricity in links (ties: the shallower, then the first in breadth-first
// order): the switch tree's top. Links, not latencies: a link made faster never moves it.
NodeId switch_tree_centre(const Topology&);

// An upper bound of the schedule's size (`lifting`: of a shape that lifts members, by
// lift_narrow or rotate_sides, so that more than the centre's neighbours may meet there).
ScheduleSize switch_tree_size(const Topology&, uint32_t trees, bool exchange_at_centre, bool lifting = false);
// The switch trees are left out past this many learners: the planner's time there goes to the
// critical-path pricing of rows that serve those trees (docs/planning-speed.md), and the
// planning time of 16k-1M-learner trees is kept as it was.
inline constexpr int kMaxSwitchTreeRanks = 4096;
std::string switch_tree_unsuitable(const Topology&);
// The three trees taking turns (switch-triple-tree, switch-fit-triple) cost the critical path
// three times a switch tree's work per slice; past this many learners they are left out: on
// the generated 4,091-learner tree they won no size and took its planning from 3.8-4.3 s to
// 5.6-6.0 s (docs/planner-quality.md).
inline constexpr int kMaxTripleTreeRanks = 1024;
std::string switch_triple_tree_unsuitable(const Topology&);

}  // namespace flexplan
