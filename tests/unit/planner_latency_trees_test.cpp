// The latency rows (planner/latency_trees.cpp): their schedules compute the all-reduce on random
// trees (the verifier and an independent interpreter), the direct exchange costs the diameter
// latency, a star's root pays one hop overhead per member, the centre tree's root is the centre,
// and the planner takes them for small messages only where they price cheapest.
#include <gtest/gtest.h>

#include <string>

#include "ir/verify.hpp"
#include "planner/algorithm_table.hpp"
#include "planner/cost_model.hpp"
#include "planner/floor.hpp"
#include "planner/latency_trees.hpp"
#include "planner/plan_builder.hpp"
#include "planner_test_trees.hpp"

namespace flexplan {
namespace {

using testing::machines;

constexpr const char* kRows[] = {"direct", "leader-direct", "centre-tree", "double-tree"};

TEST(LatencyTrees, EveryRowComputesTheAllReduceOnRandomTrees) {
  testing::RandomTrees trees(4242);
  for (int i = 0; i < 60; ++i) {
    const auto topo = trees.next(30);
    for (const char* name : kRows)
      for (const std::string& variant : {std::string(name), std::string(name) + "@3"}) {
        if (variant == "direct@3") continue;
        const auto schedule = plan_algorithm(topo, variant);
        EXPECT_NO_THROW(ir::verify_schedule(schedule, topo.num_learners())) << variant << " on " << topo.name();
        EXPECT_EQ(testing::reference_allreduce_error(schedule, topo.num_learners()), "")
            << variant << " on " << topo.name();
      }
  }
}

TEST(LatencyTrees, DirectCostsTheDiameterPlusItsRootsOverheads) {
  testing::RandomTrees trees(7);
  for (int i = 0; i < 20; ++i) {
    const auto topo = trees.next(20);
    const auto direct = plan_direct(topo);
    EXPECT_NEAR(evaluate_schedule(topo, direct).latency(), cost_floor(topo).latency, 1e-12) << topo.name();
  }
  // Four learners 10 us apart: each root receives three hops one after another.
  const auto topo = machines({4});
  CostParams params;
  params.hop_overhead = 1e-6;
  EXPECT_NEAR(evaluate_schedule(topo, plan_direct(topo), params).latency(), 10e-6 + 3e-6, 1e-12);
  // A chain's hops pay one overhead each, as before.
  EXPECT_NEAR(evaluate_schedule(topo, plan_algorithm(topo, "ring"), params).latency(),
              evaluate_schedule(topo, plan_algorithm(topo, "ring")).latency() + 6e-6, 1e-12);
}

TEST(LatencyTrees, TheTreeIsRootedAtTheCentre) {
  // Two machines and one learner on the top switch: that learner is one link nearer the others.
  testing::TreeBuilder b;
  const Link near{10e9, 1e-6}, far{10e9, 30e-6};
  const NodeId left = b.add_switch(0, "left", far);
  const NodeId right = b.add_switch(0, "right", far);
  b.add_learner(left, "a", near);
  b.add_learner(right, "c", near);
  b.add_learner(0, "b", near);
  b.add_learner(left, "a2", near);
  const auto topo = b.build();
  const std::vector<int32_t> all{0, 1, 2, 3};
  const auto order = by_distance_from_centre(topo, all);
  EXPECT_EQ(topo.node(topo.learner_node(order.front())).name, "b");
  const auto tree = plan_centre_tree(topo);
  // The leaders' tree: its top reduce is rooted at the centre.
  bool rooted = false;
  for (const auto& step : tree.steps)
    for (const auto& op : step.ops)
      if (op.kind == ir::OpKind::Reduce && op.root == order.front() && op.group.size() == 3) rooted = true;
  EXPECT_TRUE(rooted);
}

TEST(LatencyTrees, ChosenForSmallMessagesOnlyWhereCheapest) {
  PlanOptions options;
  options.cost.hop_overhead = kMeasuredHopOverhead;
  const auto topo = machines({4, 4, 4, 4, 2, 2, 2, 2}, testing::kPcie, testing::kEthernet);
  const auto report = build_plan_report(topo, options);
  const auto small = report.chosen(8);
  const std::string name = small.algorithm;
  EXPECT_TRUE(name.find("direct") != std::string::npos || name.find("tree") != std::string::npos) << name;
  // Its price is the least of every candidate's at that size.
  for (const char* other : {"ring", "recursive-doubling", "rd-leader", "binomial-tree"})
    EXPECT_LE(small.cost.at(8), evaluate_schedule(topo, plan_algorithm(topo, other), options.cost).at(8) + 1e-12)
        << other;
  const std::string large = report.chosen(uint64_t{256} << 20).algorithm;
  EXPECT_EQ(large.find("direct"), std::string::npos) << large;
}

}  // namespace
}  // namespace flexplan
