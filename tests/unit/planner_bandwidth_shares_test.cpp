// The share LP of flexreduce-bw (planner/bandwidth_shares.hpp): column generation over the
// virtual trees reaches the optimum of the LP that holds every single-switch tree at once, never
// goes below the floor, does bring in other trees where the tree itself is not optimal, and
// returns shares whose busiest link is the optimum it reports; three equal links meeting at a
// switch are mixed to the floor, also where that switch is not among the promising ones; and,
// with the commands' cost model, the optimum is what the pricers charge the schedule at its
// asymptote.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "planner/algorithms.hpp"
#include "planner/bandwidth_shares.hpp"
#include "planner/cost_model.hpp"
#include "planner/floor.hpp"
#include "planner/pipeline.hpp"
#include "planner/virtual_tree.hpp"
#include "planner_test_trees.hpp"

namespace flexplan {
namespace {

bool uses_other_trees(const BandwidthShares& shares) {
  return std::any_of(shares.classes.begin(), shares.classes.end(), [](const ShareClass& share) {
    return std::any_of(share.transparent.begin(), share.transparent.end(), [](char c) { return c != 0; });
  });
}

// Seconds per byte on the busiest separating link under the shares, from the load formula of
// bandwidth_shares.hpp: L_u = 1 - x_u(root) + sum over u's virtual ancestors a of (k_a - 1) x_u(a),
// weighted by each class's fraction and added to every physical link on u's way up.
double busiest_link(const Topology& topo, const BandwidthShares& shares) {
  std::vector<double> load(static_cast<size_t>(topo.num_nodes()), 0);
  for (const ShareClass& share : shares.classes) {
    const VirtualTree vt(topo, share.transparent);
    for (NodeId u : vt.bottom_up()) {
      const auto& ancestors = vt.ancestors(u);
      if (ancestors.empty()) continue;
      const auto& held = share.held[static_cast<size_t>(u)];
      double link = 1 - held.back();
      for (size_t j = 0; j < ancestors.size(); ++j)
        link += (static_cast<double>(vt.children(ancestors[j]).size()) - 1) * held[j];
      for (NodeId n : vt.uplink_path(topo, u)) load[static_cast<size_t>(n)] += share.weight * link;
    }
  }
  double busiest = 0;
  for (NodeId n = 0; n < topo.num_nodes(); ++n)
    if (separates_learners(topo, n))
      busiest = std::max(busiest, load[static_cast<size_t>(n)] / topo.uplink(n).bandwidth);
  return busiest;
}

TEST(BandwidthShares, ColumnGenerationReachesTheWholeLpsOptimum) {
  constexpr uint64_t kSeed = 20261125;
  testing::RandomTrees trees(kSeed);
  int needed_other_trees = 0;
  for (int i = 0; i < 400; ++i) {
    const Topology topo = trees.next(60);
    SCOPED_TRACE("seed " + std::to_string(kSeed) + " tree " + std::to_string(i));
    const auto generated = bandwidth_shares(topo, ShareSolve::column_generation);
    const auto whole = bandwidth_shares(topo, ShareSolve::all_trees);
    ASSERT_NEAR(generated.per_byte, whole.per_byte, whole.per_byte * 1e-6);
    EXPECT_GE(generated.per_byte, cost_floor(topo).per_byte * (1 - 1e-9));
    EXPECT_NEAR(busiest_link(topo, generated), generated.per_byte, generated.per_byte * 1e-6);
    if (uses_other_trees(generated)) ++needed_other_trees;
  }
  // Column generation started from the tree itself and brought others in on some trees, so the
  // comparison above covered that path too.
  EXPECT_GT(needed_other_trees, 0);
}

// The LP models the loads the pricers charge: with the commands' cost model (the star ops'
// incast loss), its optimum is the built schedule's busiest link direction under all its steps
// at once, which every pipeline of it tends to (PipelinePricer::busiest_total). Before the LP
// counted the loss on the links above a learner on its way up to its virtual parent (a switch
// of one child between them), 19 of these 400 trees differed, by up to 14.6%, and a faster link
// could move the shares to a layout priced slower (docs/whatif.md, "Faster links, slower
// plans"). The remaining difference is the noise the shares drop (3e-7 measured).
TEST(BandwidthShares, OptimumIsTheScheduleAtItsAsymptote) {
  CostParams cost;
  cost.hop_overhead = kMeasuredHopOverhead;
  cost.incast_loss = kMeasuredIncastLoss;
  for (const auto& [seed, max_learners] : {std::pair<uint64_t, int>{60'417, 10}, {20'261'129, 40}}) {
    testing::RandomTrees trees(seed);
    for (int i = 0; i < 200; ++i) {
      const Topology topo = trees.next(max_learners);
      SCOPED_TRACE("seed " + std::to_string(seed) + " " + topo.name());
      const auto shares = bandwidth_shares(topo, ShareSolve::column_generation, cost.incast_loss);
      PipelinePricer pricer(topo, plan_flexreduce_bw(topo, cost), cost);
      EXPECT_NEAR(pricer.busiest_total(), shares.per_byte, shares.per_byte * 1e-6);
    }
  }
}

// Learner a behind a 100 MB/s link (and a fast switch of one child), machine b behind 100 MB/s,
// both under switch s whose uplink is 100 MB/s too; `decoys` fast-uplinked machines beside s.
// Three groups of 100 MB/s at s: the floor is 2 x 2 / 3 of a link's time per byte. Combining at
// s costs 3/2 (whoever owns an item's sum sends and receives it twice); passing a's and b's data
// up uncombined costs the uplink 2; a mix of 2/3 combined, 1/3 passed up meets the floor.
Topology three_slow_groups(int decoys) {
  testing::TreeBuilder b;
  const Link slow{100e6, 1e-6}, fast{10e9, 1e-6};
  const NodeId s = b.add_switch(b.root(), "s", slow);
  b.add_learner(b.add_switch(s, "a_box", fast), "a", slow);  // a switch of one child
  const NodeId m = b.add_switch(s, "b", slow);
  for (int g = 0; g < 3; ++g) b.add_learner(m, "g" + std::to_string(g), fast);
  const NodeId far = b.add_switch(b.root(), "far", fast);
  for (int g = 0; g < 4; ++g) b.add_learner(far, "g" + std::to_string(g), fast);
  // Machines whose uplinks are faster than their learners' links: by the bandwidth ratio alone
  // they promise more than s, each one an orbit of its own.
  for (int d = 0; d < decoys; ++d) {
    const NodeId box = b.add_switch(b.root(), "decoy" + std::to_string(d), Link{20e9 + 1e8 * d, 1e-6});
    for (int g = 0; g < 2; ++g) b.add_learner(box, "g" + std::to_string(g), Link{1e9, 1e-6});
  }
  return b.build();
}

TEST(BandwidthShares, ThreeEqualLinksAtASwitchAreMixedToTheFloor) {
  for (int decoys : {0, 60}) {
    SCOPED_TRACE(std::to_string(decoys) + " decoys");
    const Topology topo = three_slow_groups(decoys);
    const double floor = cost_floor(topo).per_byte;
    EXPECT_NEAR(floor, 4.0 / 3 / 100e6, 1e-20);
    const auto shares = bandwidth_shares(topo);
    EXPECT_NEAR(shares.per_byte, floor, floor * 1e-6);
    EXPECT_NEAR(busiest_link(topo, shares), floor, floor * 1e-6);
    EXPECT_TRUE(uses_other_trees(shares));
  }
}

// Two racks of three learners behind 100 MB/s links each, under fast uplinks of different speeds
// (so two orbits), beside a fast machine and a slow one. Combining in a rack costs its owner's link 1 + 2x, so
// the floor (each learner's link once each way) needs both racks passed up uncombined: the tree
// transparent at both, which no single-switch tree is. Mixing the two single-rack trees helps
// each rack for only part of the vector (9/7 of the floor at best).
TEST(BandwidthShares, BindingPlacesAreHelpedAtOnce) {
  testing::TreeBuilder b;
  const Link slow{100e6, 1e-6};
  for (int r = 0; r < 2; ++r) {
    const NodeId rack = b.add_switch(b.root(), "rack" + std::to_string(r), Link{10e9 * (r + 1), 1e-6});
    for (int g = 0; g < 3; ++g) b.add_learner(rack, "g" + std::to_string(g), slow);
  }
  const NodeId far = b.add_switch(b.root(), "far", Link{10e9, 1e-6});
  for (int g = 0; g < 2; ++g) b.add_learner(far, "g" + std::to_string(g), Link{10e9, 1e-6});
  // A machine that must combine (its uplink carries one vector at most), so the flat tree fails.
  const NodeId machine = b.add_switch(b.root(), "machine", slow);
  for (int g = 0; g < 3; ++g) b.add_learner(machine, "g" + std::to_string(g), Link{10e9, 1e-6});
  const Topology topo = b.build();
  const double floor = cost_floor(topo).per_byte;
  EXPECT_NEAR(floor, 1 / 100e6, 1e-20);
  const auto shares = bandwidth_shares(topo);
  EXPECT_NEAR(shares.per_byte, floor, floor * 1e-6);
  EXPECT_NEAR(busiest_link(topo, shares), floor, floor * 1e-6);
  // The LP over the tree itself, the flat tree and each single-switch tree stays above it.
  EXPECT_GT(bandwidth_shares(topo, ShareSolve::all_trees).per_byte, floor * 1.1);
}

}  // namespace
}  // namespace flexplan
