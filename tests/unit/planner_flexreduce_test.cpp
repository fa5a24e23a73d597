// FlexReduce planning: the paper's Fig. 2 example to the unit, the mirror all-gather, units,
// degree-1 branches, the fallback beyond 64-bit units, flexreduce-bw's size bound on uniform
// trees, and its machines' splits, which a faster learner link makes no step slower with.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ir/verify.hpp"
#include "planner/algorithms.hpp"
#include "planner/cost_model.hpp"
#include "planner/flexreduce.hpp"
#include "planner/pipeline.hpp"
#include "planner_test_trees.hpp"

namespace flexplan {
namespace {

using testing::kEthernet;
using testing::kPcie;
using testing::machines;
using testing::reference_allreduce_error;
using testing::symmetric;
using testing::TreeBuilder;

// "F[0,2) {D,F}" with the paper's letters for ranks 0..4 of the 2+3 tree.
std::string describe(const ir::Op& op) {
  const auto letter = [](int rank) { return std::string(1, static_cast<char>('D' + rank)); };
  std::string text = letter(op.root) + "[" + std::to_string(op.begin) + "," +
                     std::to_string(op.end) + ") {";
  for (size_t i = 0; i < op.group.size(); ++i) text += (i ? "," : "") + letter(op.group[i]);
  return text + "}";
}

std::vector<std::string> describe(const ir::Step& step) {
  std::vector<std::string> ops;
  for (const auto& op : step.ops) ops.push_back(describe(op));
  return ops;
}

// Fig. 2: learners D, E on one machine and F, G, H on the other, 12 items.
TEST(PlannerFlexReduce, PaperFig2ExampleExactly) {
  const auto topo = machines({2, 3});
  const auto schedule = plan_flexreduce(topo);
  EXPECT_EQ(schedule.algorithm, "flexreduce");
  ASSERT_EQ(schedule.units, 12u);
  ASSERT_EQ(schedule.steps.size(), 4u);  // two reduce-scatter levels, two all-gather

  // Level 0: D[0,6) E[6,12) F[0,4) G[4,8) H[8,12), each gathered from its machine.
  EXPECT_EQ(schedule.steps[0].phase, ir::Phase::ReduceScatter);
  EXPECT_EQ(schedule.steps[0].level, 0);
  EXPECT_EQ(describe(schedule.steps[0]),
            (std::vector<std::string>{"D[0,6) {D,E}", "E[6,12) {D,E}", "F[0,4) {F,G,H}",
                                      "G[4,8) {F,G,H}", "H[8,12) {F,G,H}"}));

  // Level 1: sorted F, D, G, E, H taking F[0,2) D[2,5) G[5,7) E[7,10) H[10,12), split where the
  // holders change: 8 reduce calls.
  EXPECT_EQ(schedule.steps[1].level, 1);
  EXPECT_EQ(describe(schedule.steps[1]),
            (std::vector<std::string>{"F[0,2) {D,F}", "D[2,4) {D,F}", "D[4,5) {D,G}",
                                      "G[5,6) {D,G}", "G[6,7) {E,G}", "E[7,8) {E,G}",
                                      "E[8,10) {E,H}", "H[10,12) {E,H}"}));
  EXPECT_NO_THROW(ir::verify_schedule(schedule, topo.num_learners()));
  EXPECT_EQ(reference_allreduce_error(schedule, topo.num_learners()), "");
}

TEST(PlannerFlexReduce, AllGatherMirrorsTheReduceScatter) {
  const auto topo = machines({3, 1, 4});
  const auto schedule = plan_flexreduce(topo);
  const size_t steps = schedule.steps.size();
  ASSERT_EQ(steps % 2, 0u);
  for (size_t i = 0; i < steps / 2; ++i) {
    const auto& reduce = schedule.steps[i];
    const auto& gather = schedule.steps[steps - 1 - i];
    EXPECT_EQ(reduce.phase, ir::Phase::ReduceScatter);
    EXPECT_EQ(gather.phase, ir::Phase::AllGather);
    EXPECT_EQ(gather.level, reduce.level);
    ASSERT_EQ(gather.ops.size(), reduce.ops.size());
    for (size_t o = 0; o < reduce.ops.size(); ++o) {
      EXPECT_EQ(reduce.ops[o].kind, ir::OpKind::Reduce);
      EXPECT_EQ(gather.ops[o].kind, ir::OpKind::Broadcast);
      auto mirrored = gather.ops[o];
      mirrored.kind = ir::OpKind::Reduce;
      EXPECT_EQ(mirrored, reduce.ops[o]);
    }
  }
  EXPECT_EQ(reference_allreduce_error(schedule, topo.num_learners()), "");
}

TEST(PlannerFlexReduce, UnitsAreTheLcmOfDegreeProducts) {
  EXPECT_EQ(flexreduce_units(machines({2, 3})).units, 12u);       // lcm(2*2, 3*2)
  EXPECT_EQ(flexreduce_units(machines({4, 4})).units, 8u);        // lcm(4*2, 4*2)
  EXPECT_EQ(flexreduce_units(machines({5, 3, 1})).units, 45u);    // lcm(15, 9, 3)
  EXPECT_TRUE(flexreduce_units(machines({5, 3, 1})).exact);
  EXPECT_EQ(plan_flexreduce(machines({5, 3, 1})).units, 45u);
}

// A branch with one child divides nothing: wrapping a machine in a one-child switch leaves the
// reduce-scatter's ops as they were.
TEST(PlannerFlexReduce, SingleChildBranchChangesNothing) {
  TreeBuilder b;
  const NodeId m0 = b.add_switch(b.root(), "m0", kEthernet);
  const NodeId wrap = b.add_switch(b.root(), "wrap", kEthernet);
  const NodeId m1 = b.add_switch(wrap, "m1", kEthernet);
  for (int g = 0; g < 2; ++g) b.add_learner(m0, "gpu" + std::to_string(g), kPcie);
  for (int g = 0; g < 3; ++g) b.add_learner(m1, "gpu" + std::to_string(g), kPcie);
  const auto wrapped = plan_flexreduce(b.build());
  const auto plain = plan_flexreduce(machines({2, 3}));

  const auto ops_of = [](const ir::Schedule& s) {
    std::vector<ir::Op> ops;
    for (const auto& step : s.steps) ops.insert(ops.end(), step.ops.begin(), step.ops.end());
    return ops;
  };
  EXPECT_EQ(wrapped.units, plain.units);
  EXPECT_EQ(ops_of(wrapped), ops_of(plain));
  EXPECT_EQ(wrapped.steps.size(), plain.steps.size());  // the empty level adds no step
}

// Learners directly under the root beside a machine: a learner child holds everything.
TEST(PlannerFlexReduce, LearnerChildBesideMachines) {
  TreeBuilder b;
  const NodeId m0 = b.add_switch(b.root(), "m0", kEthernet);
  b.add_learner(b.root(), "solo", kEthernet);
  for (int g = 0; g < 3; ++g) b.add_learner(m0, "gpu" + std::to_string(g), kPcie);
  const auto topo = b.build();
  const auto schedule = plan_flexreduce(topo);
  EXPECT_EQ(schedule.units, 6u);  // lcm(3*2, 2)
  EXPECT_NO_THROW(ir::verify_schedule(schedule, topo.num_learners()));
  EXPECT_EQ(reference_allreduce_error(schedule, topo.num_learners()), "");
  // At the root every subrange has one holder per child: the solo learner and one gpu.
  for (const auto& op : schedule.steps.at(1).ops) EXPECT_EQ(op.group.size(), 2u);
}

// A comb whose branch degrees are the first 16 primes: the degree product on the deepest path
// is about 3.3e19, past 64 bits, so units fall back to 2^60 with cumulative rounding.
TEST(PlannerFlexReduce, UnitsBeyond64BitsFallBackToRounding) {
  const int primes[] = {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53};
  TreeBuilder b;
  NodeId spine = b.root();
  for (size_t i = 0; i < std::size(primes); ++i) {
    const bool last = i + 1 == std::size(primes);
    const int learners = last ? primes[i] : primes[i] - 1;
    for (int g = 0; g < learners; ++g) b.add_learner(spine, "g" + std::to_string(g), kPcie);
    if (!last) spine = b.add_switch(spine, "s", kEthernet);
  }
  const auto topo = b.build();
  const auto units = flexreduce_units(topo);
  EXPECT_FALSE(units.exact);
  EXPECT_EQ(units.units, kFallbackUnits);

  const auto schedule = plan_flexreduce(topo);
  EXPECT_EQ(schedule.units, kFallbackUnits);
  EXPECT_NO_THROW(ir::verify_schedule(schedule, topo.num_learners()));
  EXPECT_EQ(reference_allreduce_error(schedule, topo.num_learners()), "");

  // Each learner's final range is its exact portion to within one unit. At the top step the
  // root's learner child holds everything, so every final range is taken through reduce ops.
  std::vector<long double> owned(topo.num_learners(), 0);
  for (const auto& step : schedule.steps) {
    if (step.level != topo.num_levels() - 1 || step.phase != ir::Phase::ReduceScatter) continue;
    for (const auto& op : step.ops) owned[op.root] += static_cast<long double>(op.end - op.begin);
  }
  for (int rank = 0; rank < topo.num_learners(); ++rank) {
    long double portion = kFallbackUnits;
    for (NodeId a = topo.parent(topo.learner_node(rank)); a >= 0; a = topo.parent(a))
      portion /= topo.degree(a);
    EXPECT_NEAR(static_cast<double>(owned[rank]), static_cast<double>(portion), 1.0) << rank;
  }
}

// The bound that lets flexreduce-bw stop before its LP on a million-learner uniform tree must
// never exceed what the builder builds: checked on uniform trees small enough to build, with
// links faster and slower up the tree (the LP then mixes other virtual trees in).
TEST(PlannerFlexReduceBw, UniformBoundIsBelowTheBuiltSize) {
  const Link fast{100e9, 1e-6}, mid{25e9, 2e-6}, slow{5e9, 5e-6};
  const std::vector<std::pair<std::vector<int>, std::vector<Link>>> trees{
      {{8}, {fast}},
      {{2, 3, 4}, {slow, mid, fast}},
      {{2, 3, 4}, {fast, mid, slow}},
      {{4, 4}, {mid, mid}},
      {{3, 5}, {slow, fast}},
      {{2, 2, 2, 2}, {fast, slow, fast, slow}},
      {{6, 2, 3}, {mid, slow, fast}},
  };
  for (const auto& [fan_outs, links] : trees) {
    const Topology topo = symmetric(fan_outs, links);
    const ScheduleSize bound = flexreduce_bw_uniform_bound(topo);
    const ScheduleSize built = measured_size(plan_flexreduce_bw(topo));
    SCOPED_TRACE(topo.num_learners());
    EXPECT_GT(bound.ops, 0u);
    EXPECT_LE(bound.ops, built.ops);
    EXPECT_LE(bound.group_members, built.group_members);
  }
  // 2 x 3 x 4 learners: 2 ops per learner, and 2 (2 + 3 + 2 + 2) members.
  const ScheduleSize bound = flexreduce_bw_uniform_bound(symmetric({2, 3, 4}, {slow, mid, fast}));
  EXPECT_EQ(bound.ops, 48u);
  EXPECT_EQ(bound.group_members, 48u * 9);
}

TEST(PlannerFlexReduceBw, UniformBoundIsZeroOnUnevenTrees) {
  EXPECT_EQ(flexreduce_bw_uniform_bound(machines({2, 3})).ops, 0u);  // uneven fan-out
  const Link a{100e9, 1e-6}, b{50e9, 1e-6};
  TreeBuilder builder("links differ");
  for (int m = 0; m < 2; ++m) {
    const NodeId machine = builder.add_switch(builder.root(), "m" + std::to_string(m), kEthernet);
    for (int g = 0; g < 2; ++g) builder.add_learner(machine, "gpu" + std::to_string(g), m == 0 ? a : b);
  }
  EXPECT_EQ(flexreduce_bw_uniform_bound(builder.build()).group_members, 0u);
  TreeBuilder shallow("a learner beside a machine");
  const NodeId machine = shallow.add_switch(shallow.root(), "m", kEthernet);
  shallow.add_learner(machine, "gpu0", kPcie);
  shallow.add_learner(machine, "gpu1", kPcie);
  shallow.add_learner(shallow.root(), "gpu2", kEthernet);
  EXPECT_EQ(flexreduce_bw_uniform_bound(shallow.build()).ops, 0u);
}

// Two machines of five learners (bench tree random6 of the what-if property test, its switches
// of one child left out): the first machine's uplink is the busiest link of the schedule, and
// its holdings go to its two learners of lowest latency, g2 and g1. Doubling g2's link raised
// the machines' step when the split filled g2 up to the LP's optimum: its link then received
// 4 x 0.66 of the vector in that step, more than any link had (16 MiB @16: 9.604 -> 9.639 ms).
// The split now loads the machines' links least step by step, above the rest of each step.
TEST(PlannerFlexReduceBw, AFasterLearnerLinkMakesNoStepSlower) {
  const auto tree = [](double g2) {
    TreeBuilder b("two machines");
    const NodeId m0 = b.add_switch(b.root(), "m0", {2.32e9, 8.3e-6});
    const NodeId m1 = b.add_switch(b.root(), "m1", {9.53e9, 8.8e-6});
    const double m0_links[][2] = {{17.6e9, 13.9e-6}, {12.8e9, 3.66e-6}, {g2, 3.54e-6}, {13.1e9, 26e-6}, {11.3e9, 31.9e-6}};
    const double m1_links[][2] = {{18.9e9, 21.5e-6}, {11.1e9, 14.7e-6}, {3.39e9, 59.5e-6}, {14e9, 8.3e-6}, {10.8e9, 40.6e-6}};
    for (int g = 0; g < 5; ++g) b.add_learner(m0, "g" + std::to_string(g), {m0_links[g][0], m0_links[g][1]});
    for (int g = 0; g < 5; ++g) b.add_learner(m1, "g" + std::to_string(g), {m1_links[g][0], m1_links[g][1]});
    return b.build();
  };
  CostParams cost;
  cost.hop_overhead = kMeasuredHopOverhead;
  cost.incast_loss = kMeasuredIncastLoss;
  const Topology slow = tree(4.19e9), fast = tree(8.39e9);
  const auto before = evaluate_steps(slow, plan_flexreduce_bw(slow, cost), cost);
  const auto after = evaluate_steps(fast, plan_flexreduce_bw(fast, cost), cost);
  ASSERT_EQ(before.size(), after.size());
  for (size_t s = 0; s < before.size(); ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    EXPECT_LE(after[s].per_byte, before[s].per_byte * (1 + 1e-9));
    EXPECT_LE(after[s].hop_latency, before[s].hop_latency * (1 + 1e-9));
  }
  PipelinePricer slow_pricer(slow, plan_flexreduce_bw(slow, cost), cost);
  PipelinePricer fast_pricer(fast, plan_flexreduce_bw(fast, cost), cost);
  for (uint32_t slices : {16u, 64u})
    for (double bytes : {16.0 * (1 << 20), 256.0 * (1 << 20)})
      EXPECT_LE(fast_pricer.cost(slices).at(bytes), slow_pricer.cost(slices).at(bytes) * (1 + 1e-9)) << slices << " " << bytes;
}

}  // namespace
}  // namespace flexplan
