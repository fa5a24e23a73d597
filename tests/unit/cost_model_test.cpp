// The cost model: the general evaluator by hand on the paper's Fig. 2 tree, against the closed
// forms (Eq. 2 on any tree, Eq. 3 and Eq. 6 on symmetric trees, Eq. 6 on Fig. 2), the
// information floor as a lower bound, the hop overhead, and FlexReduce's call counts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "ir/pipeline_form.hpp"
#include "planner/algorithm_table.hpp"
#include "planner/algorithms.hpp"
#include "planner/cost_model.hpp"
#include "planner/critical_path.hpp"
#include "planner/pipeline.hpp"
#include "planner/flexreduce.hpp"
#include "planner/floor.hpp"
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

constexpr double kChunk = 1 << 20;  // the default pipeline chunk

// The runtime's chunk for a range of `range` bytes: equal chunks of at most kChunk.
double chunk_of(double range) { return range / std::max(1.0, std::ceil(range / kChunk)); }

// Fig. 2 with PCIe 12 GB/s, 5 us per learner link and Ethernet 1.25 GB/s, 50 us per machine
// uplink. Level 0: in the 3-learner machine every learner link carries 2/3 of the vector each
// way; each op is a 2-hop chain of 10 us hops over a third of the vector, and each round of
// hops loads every link with a third each way, so a chain's first chunk and the rest both move
// at 2/12 GB/s per range byte: 20 us + (2/3) n / 12 GB/s whatever the chunking. Level 1: every
// piece crosses the Ethernet once, half the vector each way, over 1-hop chains of 110 us.
// Doubled for the all-gather.
TEST(CostEvaluator, FlexReduceOnFig2ByHand) {
  const auto topo = machines({2, 3});
  const auto cost = evaluate_schedule(topo, plan_flexreduce(topo));
  for (double n : {0.0, 3e3, 3e6, 3e9})
    expect_close(cost.at(n), 2 * (20e-6 + (2.0 / 3) * n / 12e9 + 110e-6 + 0.5 * n / 1.25e9),
                 "n " + std::to_string(n));
}

TEST(CostEvaluator, RingAndHierarchicalOnFig2ByHand) {
  const auto topo = machines({2, 3});
  const auto ring = evaluate_schedule(topo, plan_ring(topo));
  for (double n : {0.0, 1e6, 1e9})
    expect_close(ring.at(n), 2 * 4 * (110e-6 + n / (5 * 1.25e9)));  // 8 one-hop steps
  // Local reduce: the whole vector along a chain of two 10 us PCIe hops (one chunk of fill); a
  // two-leader ring over Ethernet (half the vector per step, 110 us); the local broadcast.
  const auto hierarchical = evaluate_schedule(topo, plan_hierarchical(topo));
  for (double n : {0.0, 5e5, 1e9}) {
    const double local = 20e-6 + n / 12e9 + chunk_of(n) / 12e9;
    expect_close(hierarchical.at(n), 2 * local + 2 * (110e-6 + 0.5 * n / 1.25e9),
                 "n " + std::to_string(n));
  }
}

// A lone chain of three hops whose slowest links are 5, 20 and 10 GB/s: the last chunk arrives
// after every hop's latency and one chunk per hop but the slowest, plus the whole range through
// the slowest hop.
TEST(CostEvaluator, PipelineFillOfAChainByHand) {
  testing::TreeBuilder b;
  const Link links[] = {{10e9, 0.5e-6}, {5e9, 1e-6}, {20e9, 1.5e-6}, {20e9, 1.5e-6}};
  for (int i = 0; i < 4; ++i) b.add_learner(b.root(), "g" + std::to_string(i), links[i]);
  const auto topo = b.build();
  ir::Schedule schedule;
  schedule.units = 1;
  // Chain 1 -> 2 -> 3 -> 0: hops over (5, 20), (20, 20), (20, 10) GB/s.
  schedule.steps.push_back({ir::Phase::Reduce, 0, {{ir::OpKind::Reduce, 0, 1, 0, {0, 1, 2, 3}}}});
  const auto cost = evaluate_schedule(topo, schedule);
  const double latency = (1 + 1.5) * 1e-6 + (1.5 + 1.5) * 1e-6 + (1.5 + 0.5) * 1e-6;
  const auto expected = [&](double n) {
    const double c = chunk_of(n);
    return latency + n / 5e9 + c / 20e9 + c / 10e9;
  };
  for (double n : {0.0, 1e3, 1e6, 1e8}) expect_close(cost.at(n), expected(n), std::to_string(n));
  // The asymptote: every range many chunks long.
  expect_close(cost.asymptote().latency, latency + kChunk / 20e9 + kChunk / 10e9);
  expect_close(cost.asymptote().per_byte, 1 / 5e9);
}

// A star op's hops run side by side: one hop's latency, the root's link carrying every member's
// data, no fill.
TEST(CostEvaluator, StarOpsAreOneHopDeep) {
  testing::TreeBuilder b;
  for (int i = 0; i < 4; ++i) b.add_learner(b.root(), "g" + std::to_string(i), Link{10e9, 2e-6});
  const auto topo = b.build();
  ir::Schedule schedule;
  schedule.units = 1;
  ir::Op op{ir::OpKind::Reduce, 0, 1, 0, {0, 1, 2, 3}};
  op.shape = ir::OpShape::Star;
  schedule.steps.push_back({ir::Phase::Reduce, 0, {op}});
  const auto cost = evaluate_schedule(topo, schedule);
  for (double n : {0.0, 1e6, 1e9}) expect_close(cost.at(n), 4e-6 + 3 * n / 10e9);
}

// CostParams::incast_loss: where two or more of a star op's flows share a link between machines
// (on its root's side: into the root's machine for a reduce, out of it for a broadcast), they
// load it 1 + loss times their bytes; the members' own machine links, a star with one flow
// leaving the root's machine and a chain load their bytes. The evaluator, the pipeline windows
// and the critical path agree.
TEST(CostEvaluator, IncastLossLoadsAStarsHopsBetweenMachines) {
  const auto topo = testing::machines({2, 1, 1});  // ranks 0, 1 | 2 | 3; 12 GB/s, 1.25 GB/s
  const auto one_step = [](ir::OpKind kind, int32_t root, std::initializer_list<int32_t> group, ir::OpShape shape) {
    ir::Schedule schedule;
    schedule.algorithm = "by-hand";
    schedule.units = 1;
    ir::Op op{kind, 0, 1, root, ir::RankList(group)};
    op.shape = shape;
    schedule.steps.push_back({kind == ir::OpKind::Reduce ? ir::Phase::Reduce : ir::Phase::Broadcast, 0, {op}});
    return schedule;
  };
  CostParams incast;
  incast.incast_loss = 0.25;
  const double e = 1.25e9;
  struct Case {
    ir::Schedule schedule;
    double plain, priced;  // per_byte of the busiest link direction
  };
  const Case cases[] = {
      // 2 -> 0 and 3 -> 0 meet at m0's downlink (1 -> 0 stays in m0): 2 x 1.25 there.
      {one_step(ir::OpKind::Reduce, 0, {0, 1, 2, 3}, ir::OpShape::Star), 2 / e, 2.5 / e},
      // One hop between machines: no incast.
      {one_step(ir::OpKind::Reduce, 0, {0, 1, 2}, ir::OpShape::Star), 1 / e, 1 / e},
      // A broadcast from 2: three flows leave m1 at once (m0's downlink takes two, plain).
      {one_step(ir::OpKind::Broadcast, 2, {0, 1, 2, 3}, ir::OpShape::Star), 3 / e, 3.75 / e},
      // A chain: one flow per hop.
      {one_step(ir::OpKind::Reduce, 0, {0, 1, 2, 3}, ir::OpShape::Chain), 1 / e, 1 / e},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(ir::to_string(c.schedule.steps[0].ops[0].kind));
    EXPECT_NEAR(evaluate_steps(topo, c.schedule).at(0).per_byte, c.plain, 1e-21);
    EXPECT_NEAR(evaluate_steps(topo, c.schedule, incast).at(0).per_byte, c.priced, 1e-21);
    EXPECT_NEAR(PipelinePricer(topo, c.schedule, incast).cost(1).at(1e9), evaluate_schedule(topo, c.schedule, incast).at(1e9), 1e-12);
    EXPECT_NEAR(critical_path_cost(topo, c.schedule, 1, incast).steps.at(0).per_byte, c.priced, 1e-21);
  }
}

TEST(CostEvaluator, PerStepCostsAddUp) {
  const auto topo = machines({2, 3, 4});
  const auto schedule = plan_flexreduce(topo);
  const auto steps = evaluate_steps(topo, schedule);
  ASSERT_EQ(steps.size(), schedule.steps.size());
  const auto total = evaluate_schedule(topo, schedule);
  for (double n : {0.0, 1e5, 1e8}) {
    double sum = 0;
    for (const auto& step : steps) sum += step.at(n, kChunk);
    expect_close(sum, total.at(n));
  }
}

TEST(CostEvaluator, HopOverheadIsPaidOncePerHopOfTheSlowestChain) {
  const auto topo = machines({3, 4});
  CostParams overhead;
  overhead.hop_overhead = 2e-6;
  const auto plain = evaluate_schedule(topo, plan_ring(topo));
  const auto slow = evaluate_schedule(topo, plan_ring(topo), overhead);
  for (double n : {0.0, 1e8}) expect_close(slow.at(n) - plain.at(n), 2 * 6 * 2e-6);  // 12 steps
}

// Reductions as a resource (CostParams::reduce_bandwidth): two learners on one machine, 10 GB/s
// links of 5 us. Recursive doubling exchanges the whole vector once and each learner sums all
// of it; FlexReduce reduce-scatters halves (each sums half) and all-gathers them. Without the
// term recursive doubling wins by one hop's latency; with reductions at 4 GB/s, slower than
// the links, FlexReduce's halves win for large messages.
TEST(CostEvaluator, ReductionsAreALearnersResource) {
  const Link link{10e9, 5e-6};
  const auto topo = symmetric({1, 2}, {link, link});
  const auto rd = plan_algorithm(topo, "recursive-doubling");
  const auto fr = plan_algorithm(topo, "flexreduce");
  const double n = 64e6, alpha = 10e-6;  // a hop crosses two 5 us learner links
  expect_close(evaluate_schedule(topo, rd).at(n), alpha + n / 10e9);
  expect_close(evaluate_schedule(topo, fr).at(n), 2 * alpha + n / 10e9);
  CostParams reducing;
  reducing.reduce_bandwidth = 4e9;
  // Recursive doubling: each learner sums n at 4 GB/s, slower than its links carry n.
  expect_close(evaluate_schedule(topo, rd, reducing).at(n), alpha + n / 4e9);
  // FlexReduce: the reduce-scatter step sums n / 2 at 4 GB/s; the all-gather sums nothing.
  expect_close(evaluate_schedule(topo, fr, reducing).at(n),
               2 * alpha + (n / 2) / 4e9 + (n / 2) / 10e9);
  // Small messages: the latency still decides, for recursive doubling.
  EXPECT_LT(evaluate_schedule(topo, rd, reducing).at(1e3),
            evaluate_schedule(topo, fr, reducing).at(1e3));
  // Broadcasts reduce nothing: a schedule of broadcasts alone costs the same either way.
  ir::Schedule broadcast;
  broadcast.units = 1;
  broadcast.steps.resize(1);
  broadcast.steps.edit()[0].ops.push_back({ir::OpKind::Broadcast, 0, 1, 0, {0, 1}});
  expect_close(evaluate_schedule(topo, broadcast, reducing).at(n),
               evaluate_schedule(topo, broadcast).at(n));
}

// Who sums (hop_sums): a chain's receivers that contribute, not a root outside the group that
// only stores; a star's root once per arrival but the first when it is outside the group. On
// links far faster than the 1 GB/s reductions, the busiest learner's sums set the slope.
TEST(CostEvaluator, OnlyReceiversThatSumLoadTheirReductions) {
  const Link fast{1e12, 1e-9};
  const auto topo = symmetric({1, 3}, {fast, fast});
  CostParams reducing;
  reducing.reduce_bandwidth = 1e9;
  auto slope = [&](ir::OpShape shape, int32_t root, std::vector<int32_t> group) {
    ir::Schedule one;
    one.units = 1;
    one.steps.resize(1);
    ir::Op op{ir::OpKind::Reduce, 0, 1, root, std::move(group)};
    op.shape = shape;
    one.steps.edit()[0].ops.push_back(op);
    return evaluate_schedule(topo, one, reducing).asymptote().per_byte;
  };
  EXPECT_NEAR(slope(ir::OpShape::Chain, 2, {0, 1}), 1 / 1e9, 1e-12);    // 1 sums, 2 stores
  EXPECT_NEAR(slope(ir::OpShape::Chain, 2, {0, 1, 2}), 1 / 1e9, 1e-12); // 1 and 2 sum once each
  EXPECT_NEAR(slope(ir::OpShape::Star, 2, {0, 1}), 1 / 1e9, 1e-12);     // stores 0's, sums 1's
  EXPECT_NEAR(slope(ir::OpShape::Star, 0, {0, 1, 2}), 2 / 1e9, 1e-12);  // sums both arrivals
}

TEST(CostEvaluator, RejectsOpsOutsideTheTopology) {
  const auto topo = machines({2, 2});
  auto schedule = plan_ring(topo);
  schedule.steps.edit()[1].ops[2].root = 9;
  try {
    evaluate_schedule(topo, schedule);
    FAIL() << "a rank outside the topology was priced";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("step 1 op 2"), std::string::npos) << e.what();
  }
}

// Ops that move nothing (an empty range, a star of its root alone) price as if absent, also
// among chains of unequal length in one step and in a compact pipeline's expansion (the
// evaluator counts a step's hops into their rounds before placing them), and a schedule of
// zero slices is refused by name.
TEST(CostEvaluator, OpsThatMoveNothingPriceAsAbsent) {
  const auto topo = machines({2, 3, 2});
  const auto op = [](ir::OpShape shape, uint64_t begin, uint64_t end, int32_t root, ir::RankList group) {
    ir::Op out{ir::OpKind::Broadcast, begin, end, root, std::move(group)};
    out.shape = shape;
    return out;
  };
  ir::Schedule moving;
  moving.algorithm = "moving";
  moving.units = 4;
  moving.steps.push_back({ir::Phase::Broadcast, 0,
                          {op(ir::OpShape::Chain, 0, 2, 0, {0, 2, 5, 6}), op(ir::OpShape::Chain, 2, 3, 3, {3, 1}),
                           op(ir::OpShape::Star, 3, 4, 4, {4, 0, 6})}});
  moving.steps.push_back({ir::Phase::Broadcast, 1, {op(ir::OpShape::Chain, 0, 4, 6, {6, 4, 2, 1, 0})}});
  ir::Schedule padded = moving;
  padded.algorithm = "padded";
  auto& steps = padded.steps.edit();
  steps[0].ops.insert(steps[0].ops.begin() + 1, op(ir::OpShape::Star, 0, 4, 5, {5}));
  steps[0].ops.push_back(op(ir::OpShape::Chain, 1, 1, 2, {2, 3, 4}));
  steps[1].ops.insert(steps[1].ops.begin(), op(ir::OpShape::Chain, 3, 3, 0, {0, 1}));
  CostParams params;
  params.hop_overhead = 3e-6;
  for (uint32_t slices : {1u, 2u, 5u}) {
    const auto priced = [&](const ir::Schedule& schedule) {
      return evaluate_schedule(topo, slices == 1 ? schedule : ir::compact_pipeline(schedule, slices), params);
    };
    const auto want = priced(moving), got = priced(padded);
    ASSERT_EQ(got.step_count(), want.step_count());
    for (double n : {0.0, 8.0, 3e5, 5e7, 4e9}) EXPECT_EQ(got.at(n), want.at(n)) << "@" << slices << " n " << n;
  }
  ir::Schedule zero = moving;
  zero.slices = 0;
  EXPECT_THROW(evaluate_schedule(topo, zero), std::invalid_argument);
}

// The evaluator's price of `plan`'s schedule equals `closed_form` on 300 random trees, every
// other one with `overhead` seconds per hop, and every other pair with reductions modelled
// (alternately slower and faster than the trees' links).
template <class Plan, class ClosedForm>
void expect_closed_form_is_exact(uint64_t seed, double overhead, Plan plan,
                                 ClosedForm closed_form) {
  testing::RandomTrees trees(seed);
  for (int i = 0; i < 300; ++i) {
    const auto topo = trees.next();
    CostParams params;
    params.hop_overhead = i % 2 ? overhead : 0;
    if (i % 4 >= 2) params.reduce_bandwidth = i % 8 >= 4 ? 2e8 : 3e9;
    const auto evaluated = evaluate_schedule(topo, plan(topo), params);
    const auto closed = closed_form(topo, params);
    for (double n : {0.0, 1e3, 3e5, 1e7, 1e10})
      expect_close(evaluated.at(n), closed.at(n),
                   "tree " + std::to_string(i) + " n " + std::to_string(n));
  }
}

// Eq. 2 is exact for the depth-first ring on any tree: each step crosses every separating link
// once each way with one chunk, over one hop.
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
// exactly with Eq. 3 for BlueConnect (one-hop steps) and with both for FlexReduce while its
// ranges fit one chunk (then a chain of d - 1 hops pays every hop in turn, as Eq. 2 does). Past
// that the runtime's pipelined chains overlap their hops, and the evaluator is below Eq. 6.
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
    CostParams reducing;  // slower than every link: the reduce-scatter steps pay for it
    reducing.reduce_bandwidth = 0.5e9;
    const auto eq3_reducing = blueconnect_cost(topo, reducing);
    const auto bc_reducing = evaluate_schedule(topo, plan_blueconnect(topo), reducing);
    for (double n : {0.0, 1e3, 1e6, 4.8e8}) {
      const std::string what = "n " + std::to_string(n) + " tree of " +
                               std::to_string(topo.num_learners());
      expect_close(flexreduce_time(topo, n), eq3.at(n), "Eq. 6 vs Eq. 3, " + what);
      expect_close(bc.at(n), eq3.at(n), "BlueConnect evaluated, " + what);
      expect_close(bc_reducing.at(n), eq3_reducing.at(n), "BlueConnect reducing, " + what);
      if (n > 0) {
        EXPECT_GT(eq3_reducing.at(n), eq3.at(n)) << what;
      }
      if (n <= kChunk)
        expect_close(fr.at(n), eq3.at(n), "FlexReduce evaluated, " + what);
      else
        EXPECT_LE(fr.at(n), eq3.at(n) * (1 + 1e-12)) << "FlexReduce evaluated, " << what;
    }
  }
}

// On Fig. 2 the ranges of the two machines interleave but every piece still crosses once, so
// the evaluator and Eq. 6 agree even there while ranges fit a chunk.
TEST(CostClosedForms, Eq6MatchesTheEvaluatorOnFig2) {
  const auto topo = machines({2, 3});
  const auto evaluated = evaluate_schedule(topo, plan_flexreduce(topo));
  for (double n : {0.0, 65536.0, 3e6}) expect_close(flexreduce_time(topo, n), evaluated.at(n));
  EXPECT_LT(evaluated.at(4.8e8), flexreduce_time(topo, 4.8e8));
}

TEST(CostClosedForms, Eq3NeedsASymmetricTree) {
  EXPECT_THROW(blueconnect_cost(machines({2, 3})), std::invalid_argument);
}

TEST(CostFloor, BoundsEveryAlgorithmFromBelowOnRandomTrees) {
  testing::RandomTrees trees(31337);
  for (int i = 0; i < 300; ++i) {
    const auto topo = trees.next();
    const auto floor = cost_floor(topo);
    EXPECT_GT(floor.per_byte, 0);
    EXPECT_GT(floor.latency, 0);
    for (const auto& row : algorithm_table()) {
      if (row.unsuitable && !row.unsuitable(topo).empty()) continue;
      const std::string name(row.name);
      const auto cost = evaluate_schedule(topo, plan_algorithm(topo, name));
      for (double n : {8.0, 1e4, 1e6, 1e9})
        EXPECT_GE(cost.at(n), floor.at(n) * (1 - 1e-12)) << name << " tree " << i << " n " << n;
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
  // The trunk sees two groups: 2 (2 - 1) / (2 x 1.25 GB/s) = 1 / 1.25 GB/s, as each link.
  expect_close(cost_floor(topo).at(1e6), 1e6 / 1.25e9);
  expect_close(ring_cost(topo).asymptote().per_byte, 2 * 1 / (2 * 1.25e9));
  // Latency: gpu0 - m0 - trunk - m1 - gpu0, the trunk's own latency not crossed.
  expect_close(cost_floor(topo).latency, 2 * (5e-6 + 50e-6));
}

// Three machines of one learner each behind 1.25 GB/s, on a switch with a 10 GB/s uplink to a
// fourth learner: the switch has four groups, 2 x 3 / (3 x 1.25 + 10) GB/s; the links alone give
// 1 / 1.25 GB/s, which is larger.
TEST(CostFloor, BranchTermByHand) {
  testing::TreeBuilder b;
  const NodeId rack = b.add_switch(b.root(), "rack", Link{10e9, 1e-6});
  for (int m = 0; m < 3; ++m) b.add_learner(rack, "g" + std::to_string(m), Link{1.25e9, 1e-6});
  b.add_learner(b.root(), "far", Link{100e9, 1e-6});
  auto floor = cost_floor(b.build());
  expect_close(floor.per_byte, 1 / 1.25e9);
  // Nine learners at 2 GB/s on one switch: 2 x 8 / 18 GB/s beats 1 / 2 GB/s.
  testing::TreeBuilder star;
  for (int m = 0; m < 9; ++m) star.add_learner(star.root(), "g" + std::to_string(m), Link{2e9, 1e-6});
  floor = cost_floor(star.build());
  expect_close(floor.per_byte, 16 / 18e9);
  EXPECT_EQ(floor.bound_by, "branch 'root' (9 groups)");
}

// A group's link is the slowest between it and the branch (here: on a chain of switches of one
// child; group_cuts in general): learner a sits behind a fast switch of one child and its own
// 100 MB/s link, the rest of the tree behind s's 100 MB/s uplink and a
// fast switch of one child above it. Three groups of 100 MB/s at s: 2 x 2 / 0.3 GB/s, where
// their own uplinks (10 + 0.1 + 10 GB/s) gave the branch far less than a link's 1 / 0.1 GB/s.
TEST(CostFloor, BranchGroupsCountTheSlowestLinkOnTheirWayOut) {
  testing::TreeBuilder b;
  const Link slow{100e6, 1e-6}, fast{10e9, 1e-6};
  const NodeId top = b.add_switch(b.root(), "top", fast);  // one child: s
  const NodeId s = b.add_switch(top, "s", slow);
  b.add_learner(b.add_switch(s, "a_box", fast), "a", slow);
  const NodeId m = b.add_switch(s, "b", slow);
  for (int g = 0; g < 3; ++g) b.add_learner(m, "g" + std::to_string(g), fast);
  const NodeId far = b.add_switch(b.root(), "far", fast);
  for (int g = 0; g < 2; ++g) b.add_learner(far, "g" + std::to_string(g), fast);
  const auto floor = cost_floor(b.build());
  expect_close(floor.per_byte, 4 / 0.3e9);
  EXPECT_EQ(floor.bound_by, "branch 'root/top/s' (3 groups)");
  expect_close(floor.per_byte_own_uplinks, 1 / 100e6);
}

// Maximum flow from node `from` to the learners marked in `sink`, every tree link carrying its
// bandwidth each way: by max-flow/min-cut, what a group of learners can send towards a node.
double max_flow_to(const Topology& topo, NodeId from, const std::vector<char>& sink) {
  const size_t nodes = static_cast<size_t>(topo.num_nodes()), target = nodes;
  std::vector<std::vector<double>> capacity(nodes + 1, std::vector<double>(nodes + 1, 0));
  for (NodeId n = 0; n < topo.num_nodes(); ++n) {
    if (n != topo.root()) {
      const auto p = static_cast<size_t>(topo.parent(n));
      capacity[p][static_cast<size_t>(n)] = capacity[static_cast<size_t>(n)][p] = topo.uplink(n).bandwidth;
    }
    if (sink[static_cast<size_t>(n)]) capacity[static_cast<size_t>(n)][target] = 1e300;
  }
  double flow = 0;
  for (;;) {  // Edmonds-Karp: shortest augmenting paths
    std::vector<int> before(nodes + 1, -1);
    std::vector<size_t> queue{static_cast<size_t>(from)};
    before[static_cast<size_t>(from)] = static_cast<int>(from);
    for (size_t at = 0; at < queue.size() && before[target] < 0; ++at)
      for (size_t v = 0; v <= nodes; ++v)
        if (before[v] < 0 && capacity[queue[at]][v] > 0) {
          before[v] = static_cast<int>(queue[at]);
          queue.push_back(v);
        }
    if (before[target] < 0) return flow;
    double push = 1e300;
    for (size_t v = target; v != static_cast<size_t>(from); v = static_cast<size_t>(before[v]))
      push = std::min(push, capacity[static_cast<size_t>(before[v])][v]);
    for (size_t v = target; v != static_cast<size_t>(from); v = static_cast<size_t>(before[v])) {
      capacity[static_cast<size_t>(before[v])][v] -= push;
      capacity[v][static_cast<size_t>(before[v])] += push;
    }
    flow += push;
  }
}

// group_cuts against a maximum flow on random trees: for every switch, each child's learners
// towards it, and every learner outside it towards it.
TEST(CostFloor, GroupCutsAreMaximumFlows) {
  testing::RandomTrees trees(20261126);
  for (int i = 0; i < 150; ++i) {
    const auto topo = trees.next(30);
    const auto cuts = group_cuts(topo);
    for (NodeId n = 0; n < topo.num_nodes(); ++n) {
      if (topo.is_learner(n)) continue;
      for (NodeId c : topo.children(n)) {
        std::vector<char> group(static_cast<size_t>(topo.num_nodes()), 0);
        for (int rank : topo.learners_under(c)) group[static_cast<size_t>(topo.learner_node(rank))] = 1;
        EXPECT_NEAR(cuts.below[static_cast<size_t>(c)], max_flow_to(topo, n, group),
                    cuts.below[static_cast<size_t>(c)] * 1e-12) << "tree " << i << " child " << topo.full_name(c);
      }
      if (!separates_learners(topo, n)) continue;
      std::vector<char> rest(static_cast<size_t>(topo.num_nodes()), 0);
      for (int rank = 0; rank < topo.num_learners(); ++rank) rest[static_cast<size_t>(topo.learner_node(rank))] = 1;
      for (int rank : topo.learners_under(n)) rest[static_cast<size_t>(topo.learner_node(rank))] = 0;
      EXPECT_NEAR(cuts.above[static_cast<size_t>(n)], max_flow_to(topo, n, rest),
                  cuts.above[static_cast<size_t>(n)] * 1e-12) << "tree " << i << " above " << topo.full_name(n);
    }
  }
}

// The rest of the tree behind a slow link that is not on the branch's own way up: machine x's
// learners sit behind one 100 MB/s link under a fast switch of one child; learner y and machine z
// sit behind 100 MB/s each under switch s, whose uplink is fast. At s, three groups of 100 MB/s.
TEST(CostFloor, TheRestOfTheTreeCountsItsMinimumCut) {
  testing::TreeBuilder b;
  const Link slow{100e6, 1e-6}, fast{25e9, 1e-6};
  const NodeId x = b.add_switch(b.add_switch(b.root(), "x_box", fast), "x", slow);
  for (int g = 0; g < 4; ++g) b.add_learner(x, "g" + std::to_string(g), fast);
  const NodeId s = b.add_switch(b.root(), "s", fast);
  b.add_learner(s, "y", slow);
  const NodeId z = b.add_switch(s, "z", slow);
  for (int g = 0; g < 3; ++g) b.add_learner(z, "g" + std::to_string(g), fast);
  const auto topo = b.build();
  expect_close(group_cuts(topo).above[static_cast<size_t>(s)], 100e6);
  const auto floor = cost_floor(topo);
  expect_close(floor.per_byte, 4 / 0.3e9);
  EXPECT_EQ(floor.bound_by, "branch 'root/s' (3 groups)");
  expect_close(floor.per_byte_own_uplinks, 1 / 100e6);
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
