// The baselines: ring over the depth-first order, BlueConnect on symmetric trees and its ring
// fallback, hierarchical with one leader per machine.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "codegen/lowering.hpp"
#include "ir/verify.hpp"
#include "planner/algorithm_table.hpp"
#include "planner/algorithms.hpp"
#include "planner_test_trees.hpp"

namespace flexplan {
namespace {

using testing::kEthernet;
using testing::kPcie;
using testing::machines;
using testing::reference_allreduce_error;
using testing::symmetric;
using testing::TreeBuilder;

void expect_correct(const ir::Schedule& schedule, const Topology& topo) {
  EXPECT_NO_THROW(ir::verify_schedule(schedule, topo.num_learners())) << schedule.algorithm;
  EXPECT_EQ(reference_allreduce_error(schedule, topo.num_learners()), "") << schedule.algorithm;
}

// Learners whose ranks do not follow the tree: the ring must still follow the tree.
Topology permuted_machines() {
  TreeBuilder b;
  const NodeId m0 = b.add_switch(b.root(), "m0", kEthernet);
  const NodeId m1 = b.add_switch(b.root(), "m1", kEthernet);
  const NodeId m2 = b.add_switch(b.root(), "m2", kEthernet);
  const int ranks[] = {4, 0, 6, 2, 5, 1, 3};
  b.add_learner(m0, "gpu0", kPcie, ranks[0]);
  b.add_learner(m1, "gpu0", kPcie, ranks[1]);
  b.add_learner(m1, "gpu1", kPcie, ranks[2]);
  b.add_learner(m1, "gpu2", kPcie, ranks[3]);
  b.add_learner(m2, "gpu0", kPcie, ranks[4]);
  b.add_learner(m2, "gpu1", kPcie, ranks[5]);
  b.add_learner(m2, "gpu2", kPcie, ranks[6]);
  return b.build();
}

TEST(PlannerRing, CrossesEveryMachineUplinkOnceEachWayPerStep) {
  const auto topo = permuted_machines();
  const auto schedule = plan_ring(topo);
  const int p = topo.num_learners();
  EXPECT_EQ(schedule.algorithm, "ring");
  EXPECT_EQ(schedule.units, static_cast<uint64_t>(p));
  ASSERT_EQ(schedule.steps.size(), 2u * (p - 1));
  for (const auto& step : schedule.steps) {
    ASSERT_EQ(step.ops.size(), static_cast<size_t>(p));
    for (NodeId machine : topo.children(topo.root())) {
      int out = 0, in = 0;
      for (const auto& op : step.ops) {
        EXPECT_EQ(op.group.size(), 2u);
        EXPECT_EQ(op.end - op.begin, 1u);
        for (const auto& hop : codegen::lower_op(op)) {
          const bool from = topo.parent(topo.learner_node(hop.src)) == machine;
          const bool to = topo.parent(topo.learner_node(hop.dst)) == machine;
          out += from && !to;
          in += to && !from;
        }
      }
      EXPECT_EQ(out, 1);
      EXPECT_EQ(in, 1);
    }
  }
  expect_correct(schedule, topo);
}

TEST(PlannerBlueConnect, DecomposesLevelByLevelOnSymmetricTrees) {
  // 2 machines x 3 learners: 2 ring steps inside machines, 1 across, then the mirror.
  const auto topo = symmetric({2, 3}, {kEthernet, kPcie});
  ASSERT_FALSE(blueconnect_falls_back(topo));
  const auto schedule = plan_blueconnect(topo);
  EXPECT_EQ(schedule.algorithm, "blueconnect");
  EXPECT_EQ(schedule.units, 6u);
  ASSERT_EQ(schedule.steps.size(), 6u);
  const int levels[] = {0, 0, 1, 1, 0, 0};
  for (size_t s = 0; s < schedule.steps.size(); ++s) {
    const auto& step = schedule.steps[s];
    EXPECT_EQ(step.level, levels[s]);
    EXPECT_EQ(step.ops.size(), 6u);  // every learner sends in every step
    for (const auto& op : step.ops) {
      const NodeId a = topo.parent(topo.learner_node(op.group[0]));
      const NodeId b = topo.parent(topo.learner_node(op.group[1]));
      EXPECT_EQ(a == b, step.level == 0) << "step " << s;
      // Level 0 rings chunk the whole vector in thirds, level 1 rings a third in halves.
      EXPECT_EQ(op.end - op.begin, step.level == 0 ? 2u : 1u);
    }
  }
  expect_correct(schedule, topo);
}

TEST(PlannerBlueConnect, ThreeLevelsAndDegreeOneLevels) {
  for (const auto& fan_outs : std::vector<std::vector<int>>{{2, 2, 2}, {3, 1, 4}, {1, 5}, {4, 2}}) {
    const auto topo = symmetric(fan_outs, {kEthernet, kEthernet, kPcie});
    ASSERT_FALSE(blueconnect_falls_back(topo));
    expect_correct(plan_blueconnect(topo), topo);
  }
}

TEST(PlannerBlueConnect, FallsBackToTheRingWhenNotSymmetric) {
  const auto topo = machines({2, 3});
  EXPECT_TRUE(blueconnect_falls_back(topo));
  auto schedule = plan_blueconnect(topo);
  EXPECT_EQ(schedule.algorithm, "blueconnect");
  schedule.algorithm = "ring";
  EXPECT_EQ(schedule, plan_ring(topo));
}

TEST(PlannerHierarchical, LocalReduceLeaderRingLocalBroadcast) {
  const auto topo = machines({2, 3, 1});
  const auto schedule = plan_hierarchical(topo);
  EXPECT_EQ(schedule.algorithm, "hierarchical");
  EXPECT_EQ(schedule.units, 3u);  // three leaders
  ASSERT_EQ(schedule.steps.size(), 1u + 2u * 2u + 1u);
  const auto& reduce = schedule.steps.front();
  const auto& broadcast = schedule.steps.back();
  EXPECT_EQ(reduce.phase, ir::Phase::Reduce);
  EXPECT_EQ(broadcast.phase, ir::Phase::Broadcast);
  ASSERT_EQ(reduce.ops.size(), 2u);  // the one-learner machine has nothing to reduce
  EXPECT_EQ(reduce.ops[0].root, 0);
  EXPECT_EQ(reduce.ops[0].group, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(reduce.ops[1].root, 2);
  EXPECT_EQ(reduce.ops[1].group, (std::vector<int32_t>{2, 3, 4}));
  // The leader ring: only leaders 0, 2 and 5 take part.
  for (size_t s = 1; s + 1 < schedule.steps.size(); ++s)
    for (const auto& op : schedule.steps[s].ops)
      for (int32_t member : op.group) EXPECT_TRUE(member == 0 || member == 2 || member == 5);
  expect_correct(schedule, topo);
}

TEST(PlannerHierarchical, OneMachineIsJustReduceAndBroadcast) {
  const auto topo = machines({4});
  const auto schedule = plan_hierarchical(topo);
  ASSERT_EQ(schedule.steps.size(), 2u);
  EXPECT_EQ(schedule.steps[0].phase, ir::Phase::Reduce);
  EXPECT_EQ(schedule.steps[1].phase, ir::Phase::Broadcast);
  expect_correct(schedule, topo);
}

TEST(PlannerRegistry, NamesDispatchAndUnknownNames) {
  const auto names = algorithm_names();
  ASSERT_GE(names.size(), 5u);
  EXPECT_EQ(names.front(), "flexreduce");
  const auto topo = machines({2, 2});
  for (const auto& name : names) EXPECT_EQ(plan_algorithm(topo, name).algorithm, name);
  EXPECT_EQ(plan_algorithm(topo, "flexreduce@4").algorithm, "flexreduce@4");
  try {
    plan_algorithm(topo, "butterfly");
    FAIL() << "unknown algorithm accepted";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'butterfly'"), std::string::npos) << what;
    EXPECT_NE(what.find("flexreduce"), std::string::npos) << what;
    // The unknown name is named once, not listed among the known ones.
    EXPECT_EQ(what.find("butterfly"), what.rfind("butterfly")) << what;
  }
  for (const char* bad : {"ring@4", "flexreduce@0", "flexreduce@x", "flexreduce@"})
    EXPECT_THROW(find_algorithm(bad), std::invalid_argument) << bad;
}

// Every estimate bounds the built schedule; those of algorithms priced by a closed form (built
// only when they win) are exact.
TEST(PlannerRegistry, SizeEstimatesMatchOrBoundTheBuiltSchedules) {
  testing::RandomTrees trees(99);
  for (int i = 0; i < 50; ++i) {
    const auto topo = trees.next();
    for (const auto& row : algorithm_table()) {
      if (row.unsuitable && !row.unsuitable(topo).empty()) continue;
      const AlgorithmChoice choice{&row, 1};
      const auto actual = measured_size(choice.build(topo));
      const auto estimate = choice.estimate(topo);
      EXPECT_LE(actual.ops, estimate.ops) << row.name;
      EXPECT_LE(actual.group_members, estimate.group_members) << row.name;
      if (row.closed_form) {
        EXPECT_EQ(actual.ops, estimate.ops) << row.name;
        EXPECT_EQ(actual.group_members, estimate.group_members) << row.name;
      }
    }
  }
}

}  // namespace
}  // namespace flexplan
