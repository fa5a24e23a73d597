// The cost model: the general evaluator by hand on the paper's Fig. 2 tree, against the closed
// forms (Eq. 2 on any tree, Eq. 3 and Eq. 6 on symmetric trees, Eq. 6 on Fig. 2), the
// information floor as a lower bound, the hop overhead, and FlexReduce's call counts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "planner/algorithms.hpp"
#include "planner/cost_model.hpp"
#include "planner/flexreduce.hpp"
#include "planner_test_trees.hpp"

namespace flexplan {
namespace {

using testing::kEthernet;
using testing::kPcie;
using testing::machines;
using testing::symmetric;

// Equal to within a relative 1e-12 (the forms add the same terms in different orders).
void expect_close(double actual, double expected, const std::string& what = "") {
  EXPECT_NEAR(actual, expected, std::abs(expected) * 1e-12 + 1e-300) << what;
}

// Fig. 2 with PCIe 12 GB/s, 5 us per learner link and Ethernet 1.25 GB/s, 50 us per machine
// uplink. Level 0: in the 3-learner machine every learner link carries 2/3 of the vector each
// way over a 2-hop chain of 10 us hops. Level 1: every piece crosses the Ethernet once, half the
// vector each way, over 1-hop chains of 110 us. Doubled for the all-gather.
TEST(CostEvaluator, FlexReduceOnFig2ByHand) {
  const auto topo = machines({2, 3});
  const auto cost = evaluate_schedule(topo, plan_flexreduce(topo));
  expect_close(cost.latency, 2 * (20e-6 + 110e-6));
  expect_close(cost.per_byte, 2 * ((2.0 / 3) / 12e9 + 0.5 / 1.25e9));
}

TEST(CostEvaluator, RingAndHierarchicalOnFig2ByHand) {
  const auto topo = machines({2, 3});
  const auto ring = evaluate_schedule(topo, plan_ring(topo));
  expect_close(ring.latency, 2 * 4 * 110e-6);  // 8 steps, the slowest hop crosses machines
  expect_close(ring.per_byte, 2 * 4 / (5 * 1.25e9));
  // Local reduce (whole vector over PCIe, chain of two 10 us hops), a two-leader ring over
  // Ethernet (half the vector per step, 110 us), local broadcast.
  const auto hierarchical = evaluate_schedule(topo, plan_hierarchical(topo));
  expect_close(hierarchical.latency, 20e-6 + 2 * 110e-6 + 20e-6);
  expect_close(hierarchical.per_byte, 2 / 12e9 + 2 * 0.5 / 1.25e9);
}

TEST(CostEvaluator, PerStepCostsAddUp) {
  const auto topo = machines({2, 3, 4});
  const auto schedule = plan_flexreduce(topo);
  const auto steps = evaluate_steps(topo, schedule);
  ASSERT_EQ(steps.size(), schedule.steps.size());
  LinearCost sum;
  for (const auto& step : steps) sum += step;
  const auto total = evaluate_schedule(topo, schedule);
  EXPECT_EQ(sum.latency, total.latency);
  EXPECT_EQ(sum.per_byte, total.per_byte);
}

TEST(CostEvaluator, HopOverheadIsPaidOncePerHopOfTheSlowestChain) {
  const auto topo = machines({3, 4});
  const CostParams overhead{2e-6};
  const auto plain = evaluate_schedule(topo, plan_ring(topo));
  const auto slow = evaluate_schedule(topo, plan_ring(topo), overhead);
  expect_close(slow.latency - plain.latency, 2 * 6 * 2e-6);  // 12 steps of one hop
  EXPECT_EQ(slow.per_byte, plain.per_byte);
}

TEST(CostEvaluator, RejectsOpsOutsideTheTopology) {
  const auto topo = machines({2, 2});
  auto schedule = plan_ring(topo);
  schedule.steps[1].ops[2].root = 9;
  try {
    evaluate_schedule(topo, schedule);
    FAIL() << "a rank outside the topology was priced";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("step 1 op 2"), std::string::npos) << e.what();
  }
}

// The evaluator's price of `plan`'s schedule equals `closed_form` on 300 random trees, every
// other one with `overhead` seconds per hop.
template <class Plan, class ClosedForm>
void expect_closed_form_is_exact(uint64_t seed, double overhead, Plan plan,
                                 ClosedForm closed_form) {
  testing::RandomTrees trees(seed);
  for (int i = 0; i < 300; ++i) {
    const auto topo = trees.next();
    const CostParams params{i % 2 ? overhead : 0};
    const auto evaluated = evaluate_schedule(topo, plan(topo), params);
    const auto closed = closed_form(topo, params);
    expect_close(evaluated.latency, closed.latency, "tree " + std::to_string(i));
    expect_close(evaluated.per_byte, closed.per_byte, "tree " + std::to_string(i));
  }
}

// Eq. 2 is exact for the depth-first ring on any tree: each step crosses every separating link
// once each way with one chunk.
TEST(CostClosedForms, RingEq2MatchesTheEvaluatorOnRandomTrees) {
  expect_closed_form_is_exact(
      5150, 1e-6, plan_ring,
      [](const Topology& t, const CostParams& p) { return ring_cost(t, p); });
}

// The hierarchical schedule's closed form is exact too, with or without hop overheads.
TEST(CostClosedForms, HierarchicalMatchesTheEvaluatorOnRandomTrees) {
  expect_closed_form_is_exact(
      6060, 3e-6, plan_hierarchical,
      [](const Topology& t, const CostParams& p) { return hierarchical_cost(t, p); });
}

// On symmetric trees Eq. 6 (FlexReduce) equals Eq. 3 (BlueConnect), and the evaluator agrees
// with both for both schedules.
TEST(CostClosedForms, Eq6EqualsEq3AndTheEvaluatorOnSymmetricTrees) {
  const Link slow{1e9, 40e-6}, mid{5e9, 10e-6}, fast{20e9, 2e-6};
  struct Shape {
    std::vector<int> fan_outs;
    std::vector<Link> links;
  };
  const Shape shapes[] = {{{2, 3}, {slow, fast}},       {{3, 2}, {slow, fast}},
                          {{2, 2, 2}, {slow, mid, fast}}, {{3, 4, 2}, {slow, mid, fast}},
                          {{4, 2, 3}, {mid, slow, fast}}, {{6}, {fast}},
                          {{2, 3}, {fast, slow}}};
  for (const auto& shape : shapes) {
    const auto topo = symmetric(shape.fan_outs, shape.links);
    ASSERT_TRUE(topo.is_symmetric());
    const auto eq3 = blueconnect_cost(topo);
    const auto fr = evaluate_schedule(topo, plan_flexreduce(topo));
    const auto bc = evaluate_schedule(topo, plan_blueconnect(topo));
    for (double n : {0.0, 1e3, 1e6, 4.8e8}) {
      const std::string what = "n " + std::to_string(n) + " tree of " +
                               std::to_string(topo.num_learners());
      expect_close(flexreduce_time(topo, n), eq3.at(n), "Eq. 6 vs Eq. 3, " + what);
      expect_close(fr.at(n), eq3.at(n), "FlexReduce evaluated, " + what);
      expect_close(bc.at(n), eq3.at(n), "BlueConnect evaluated, " + what);
    }
  }
}

// On Fig. 2 the ranges of the two machines interleave but every piece still crosses once, so
// the evaluator and Eq. 6 agree even there.
TEST(CostClosedForms, Eq6MatchesTheEvaluatorOnFig2) {
  const auto topo = machines({2, 3});
  const auto evaluated = evaluate_schedule(topo, plan_flexreduce(topo));
  for (double n : {0.0, 65536.0, 4.8e8}) expect_close(flexreduce_time(topo, n), evaluated.at(n));
}

TEST(CostClosedForms, Eq3NeedsASymmetricTree) {
  EXPECT_THROW(blueconnect_cost(machines({2, 3})), std::invalid_argument);
}

TEST(CostFloor, BoundsEveryAlgorithmFromBelowOnRandomTrees) {
  testing::RandomTrees trees(31337);
  for (int i = 0; i < 300; ++i) {
    const auto topo = trees.next();
    const double floor = information_floor(topo, 1);
    EXPECT_GT(floor, 0);
    for (const auto& name : algorithm_names()) {
      const auto cost = evaluate_schedule(topo, plan_algorithm(topo, name));
      EXPECT_GE(cost.per_byte, floor * (1 - 1e-12)) << name << " tree " << i;
    }
  }
}

TEST(CostFloor, IgnoresLinksWithEveryLearnerOnOneSide) {
  testing::TreeBuilder b;
  const NodeId trunk = b.add_switch(b.root(), "trunk", Link{1e3, 1e-3});  // all learners below
  const NodeId m0 = b.add_switch(trunk, "m0", kEthernet);
  const NodeId m1 = b.add_switch(trunk, "m1", kEthernet);
  b.add_learner(m0, "gpu0", kPcie);
  b.add_learner(m1, "gpu0", kPcie);
  const auto topo = b.build();
  expect_close(information_floor(topo, 1e6), 1e6 / 1.25e9);
  expect_close(ring_cost(topo).per_byte, 2 * 1 / (2 * 1.25e9));
}

TEST(CostBandwidth, NcclTestsConventions) {
  expect_close(algorithm_bandwidth(1e9, 0.5), 2e9);
  expect_close(bus_bandwidth(1e9, 0.5, 8), 2e9 * 2 * 7 / 8);
  expect_close(ring_reduce_scatter_time(1e6, 4, 1e9, 1e-5), 3 * (1e-5 + 1e6 / 4e9));
}

// Fig. 2's reduce calls: at the top step F, D, G, E, H root 1, 2, 2, 2, 1 ops (Eq. 12 allows
// 3); counting every reduce a learner takes part in: D 6, E 6, F 5, G 7, H 5.
TEST(CostReduceCalls, Fig2CountsAndEq12) {
  const auto topo = machines({2, 3});
  const auto stats = reduce_call_stats(topo, plan_flexreduce(topo));
  EXPECT_DOUBLE_EQ(stats.top_rooted_avg, 8.0 / 5);
  EXPECT_EQ(stats.top_rooted_max, 2);
  EXPECT_EQ(stats.eq12_bound, 3);
  EXPECT_DOUBLE_EQ(stats.taking_part_avg, 29.0 / 5);
  EXPECT_EQ(stats.taking_part_max, 7);
  for (int rank = 0; rank < 5; ++rank) EXPECT_EQ(eq12_bound(topo, rank, topo.root()), 3);
  // Three machines of three: ceil(1/3) per machine + 1 = 4, as the paper's testbeds.
  const auto three = machines({3, 3, 3});
  EXPECT_EQ(reduce_call_stats(three, plan_flexreduce(three)).eq12_bound, 4);
}

}  // namespace
}  // namespace flexplan
