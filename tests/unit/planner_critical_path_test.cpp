// The critical-path price (planner/critical_path.hpp): a small pipeline priced by hand, never
// below the floor nor above the step-by-step price on random trees, and the planner, predict
// and the plan's price using it for the latency rows.
#include <gtest/gtest.h>

#include <fmt/core.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "planner/algorithm_table.hpp"
#include "planner/cost_model.hpp"
#include "planner/critical_path.hpp"
#include "planner/floor.hpp"
#include "planner/latency_trees.hpp"
#include "planner/pipeline.hpp"
#include "planner/plan_builder.hpp"
#include "planner/plan_price.hpp"
#include "planner/prediction.hpp"
#include "planner_test_trees.hpp"
#include "whatif/editable_tree.hpp"
#include "whatif/variation.hpp"

namespace flexplan {
namespace {

ir::Op star_reduce(int32_t root, std::initializer_list<int32_t> group) {
  ir::Op op{ir::OpKind::Reduce, 0, 1, root, ir::RankList(group)};
  op.shape = ir::OpShape::Star;
  return op;
}

TEST(CriticalPath, TwoStepsInTwoSlicesByHand) {
  // Learners a, b, c on one switch, 1 GB/s links of 1, 2 and 3 us. Step 0: a sends to b; step 1:
  // b sends to c. Two slices, hop overhead 0.5 us.
  testing::TreeBuilder b;
  b.add_learner(0, "a", Link{1e9, 1e-6});
  b.add_learner(0, "b", Link{1e9, 2e-6});
  b.add_learner(0, "c", Link{1e9, 3e-6});
  const auto topo = b.build();
  ir::Schedule base;
  base.algorithm = "by-hand";
  base.units = 1;
  base.steps.push_back(ir::Step{ir::Phase::Reduce, 0, {star_reduce(1, {0, 1})}});
  base.steps.push_back(ir::Step{ir::Phase::Reduce, 0, {star_reduce(2, {1, 2})}});
  CostParams params;
  params.hop_overhead = 0.5e-6;
  // Every link direction carries one slice at a time in every step, so a slice crosses at
  // p = 0.5 ns a message byte (n / 2 bytes at 1 GB/s). Hop a->b: 3 us + 0.5 us, b->c: 5.5 us.
  //   step 0: a sends slice 0: a done at 0.5 + pn, b at 3.5 + pn.
  //   step 1: a sends slice 1 (b has it at 4 + 2pn), b sends slice 0 (c at 9 + 2pn);
  //           b is done at max(4 + 2pn, 3.5 + pn + 0.5 + pn) = 4 + 2pn.
  //   step 2: b sends slice 1: c has it at 4 + 2pn + 5.5 + pn = 9.5 us + 3pn.
  // Step by step it would be 3.5 + 5.5 + 5.5 = 14.5 us + 3pn.
  // (This is the runtime step by step on each rank: SliceProgress::PerRank.)
  const double p = 0.5e-9;
  const auto cost = critical_path_cost(topo, base, 2, params, SliceProgress::PerRank);
  for (const double n : {0.0, 8.0, 65536.0, 1e6})
    EXPECT_NEAR(cost.at(n), 9.5e-6 + 3 * p * n, 1e-15 + 1e-12 * cost.at(n)) << n;
  // With steps overlapping (PerSlice, the runtime's and the planner's default), a sends slice 1 at once, and b
  // forwards each slice as it lands: c has both at 3.5 + pn + 5.5 + pn = 9 us + 2pn, unless the
  // bandwidth bound (1 ns a byte + 5.5 us) is above that.
  CostParams per_slice = params;
  per_slice.slice_progress = SliceProgress::PerSlice;
  const auto overlapped = critical_path_cost(topo, base, 2, per_slice);
  for (const double n : {0.0, 8.0, 65536.0, 1e6})
    EXPECT_NEAR(overlapped.at(n), std::max(9e-6 + 2 * p * n, 1e-9 * n + 5.5e-6), 1e-15 + 1e-12 * overlapped.at(n)) << n;
  const auto steps = evaluate_schedule(topo, pipeline_slices(base, 2), params);
  EXPECT_NEAR(steps.at(1e6), 14.5e-6 + 3 * p * 1e6, 1e-15);
  // Its bandwidth bound: every direction carries the whole message once, 1 ns a byte, plus the
  // slowest hop (5.5 us), below the chain at every size here.
  EXPECT_NEAR(cost.steps.at(0).per_byte, 1e-9, 1e-21);
  EXPECT_NEAR(cost.steps.at(0).hop_latency, 5.5e-6, 1e-18);
}

// The smallest budget critical_path_cost_within prices `base` within (the work it has counted
// at its last budget check), found by bisection: a budget prices iff every check is within it.
uint64_t smallest_budget(const Topology& topo, const ir::Schedule& base, uint32_t slices, const CostParams& params) {
  uint64_t work = 0;
  EXPECT_TRUE(critical_path_cost_within(topo, base, slices, params, std::numeric_limits<uint64_t>::max(), work));
  uint64_t low = 0, high = work;  // high prices
  while (low < high) {
    const uint64_t middle = low + (high - low) / 2;
    uint64_t spent = 0;
    if (critical_path_cost_within(topo, base, slices, params, middle, spent))
      high = middle;
    else
      low = middle + 1;
  }
  return high;
}

// The planner refuses a critical path whose least work passes its budget, so that least must
// be at most the smallest budget that prices it: per slice and per rank, with and without a
// hop overhead, on a hand-made pipeline whose ranks each touch every step (the case that once
// overcounted per rank: 576 against 560) and on the latency rows' bases of random trees.
TEST(CriticalPath, ItsLeastWorkNeverPassesTheSmallestBudgetThatPricesIt) {
  std::vector<std::pair<Topology, ir::Schedule>> cases;
  {
    testing::TreeBuilder b;
    b.add_learner(0, "a", Link{1e9, 10e-6});
    b.add_learner(0, "b", Link{1e9, 10e-6});
    ir::Schedule base;
    base.algorithm = "to-and-fro";
    base.units = 2;
    for (int step = 0; step < 3; ++step) {
      ir::Op there{ir::OpKind::Broadcast, 0, 1, 0, ir::RankList({0, 1})};
      ir::Op back{ir::OpKind::Broadcast, 1, 2, 1, ir::RankList({1, 0})};
      base.steps.push_back(ir::Step{ir::Phase::Broadcast, 0, {there, back}});
    }
    cases.emplace_back(b.build(), base);
  }
  testing::RandomTrees trees(5150);
  for (int i = 0; i < 8; ++i) {
    const auto topo = trees.next();
    for (const char* row : {"centre-tree", "switch-tree", "double-tree", "leader-direct", "switch-binary-tree"}) {
      const AlgorithmChoice choice = find_algorithm(row);
      if (choice.row->unsuitable && !choice.row->unsuitable(topo).empty()) continue;
      cases.emplace_back(topo, choice.build(topo, {}));
    }
  }
  int checked = 0;
  for (const auto& [topo, base] : cases)
    for (const uint32_t slices : {1u, 3u, 16u})
      for (const SliceProgress progress : {SliceProgress::PerSlice, SliceProgress::PerRank})
        for (const double overhead : {0.0, 1e-6}) {
          CostParams params;
          params.hop_overhead = overhead;
          params.slice_progress = progress;
          SCOPED_TRACE(fmt::format("{} on {}, {} slices, {}, overhead {}", base.algorithm, topo.name(), slices,
                                   progress == SliceProgress::PerSlice ? "per slice" : "per rank", overhead));
          const uint64_t least = critical_path_least_work(critical_path_counts(base, topo.num_learners()), slices, params);
          EXPECT_LE(least, smallest_budget(topo, base, slices, params));
          ++checked;
        }
  EXPECT_GT(checked, 200);
}

TEST(CriticalPath, ARankHandlesItsHopsOneAfterAnother) {
  // Links without latency: in one step rank 1 receives from 0 and sends to 2 and to 3. Each hop
  // takes one overhead (1 us); rank 1 has three hop ends, 1.5 us of its progress thread.
  testing::TreeBuilder b;
  for (const char* name : {"a", "b", "c", "d"}) b.add_learner(0, name, Link{1e9, 0});
  const auto topo = b.build();
  ir::Schedule base;
  base.algorithm = "by-hand";
  base.units = 1;
  base.steps.push_back(
      ir::Step{ir::Phase::Reduce, 0, {star_reduce(1, {0, 1}), star_reduce(2, {1, 2}), star_reduce(3, {1, 3})}});
  CostParams params;
  params.hop_overhead = 1e-6;
  EXPECT_NEAR(critical_path_cost(topo, base, 1, params).at(0), 1.5e-6, 1e-18);
  params.hop_overhead = 0;
  EXPECT_NEAR(critical_path_cost(topo, base, 1, params).at(1000), 2 * 1e-6, 1e-18)
      << "rank 1's uplink carries two messages of 1000 bytes at 1 GB/s";
}

TEST(CriticalPath, PerSliceACoreCopiesInsideItsMachineAndReducesOneThingAtATime) {
  // Two learners, 10 GB/s links (0.1 ns a byte), reductions at 5 GB/s (0.2 ns a byte). Step 0:
  // b sends to a, which sums it; step 1: a sends the sum back. Priced per slice over 16 slices,
  // each link direction carries the message once (0.1 ns a byte) and a's reductions take 0.2 ns
  // a byte. Where a and b share a machine and reduce on the CPU, a's core also copies in
  // what it receives and out what it sends, one after another with its sums: 0.1 + 0.1 + 0.2 =
  // 0.4 ns a byte. On two machines (the network between them) or with no reduction rate (GPUs)
  // nothing is copied by a core, and per rank the steps are priced as before.
  const Link link{10e9, 0};
  testing::TreeBuilder one;
  const NodeId machine = one.add_switch(one.root(), "m0", link);
  one.add_learner(machine, "a", link);
  one.add_learner(machine, "b", link);
  testing::TreeBuilder two;
  two.add_learner(two.add_switch(two.root(), "m0", link), "a", link);
  two.add_learner(two.add_switch(two.root(), "m1", link), "b", link);
  ir::Schedule base;
  base.algorithm = "by-hand";
  base.units = 1;
  base.steps.push_back(ir::Step{ir::Phase::Reduce, 0, {star_reduce(0, {1, 0})}});
  ir::Op back{ir::OpKind::Broadcast, 0, 1, 0, ir::RankList({0, 1})};
  back.shape = ir::OpShape::Star;
  base.steps.push_back(ir::Step{ir::Phase::Broadcast, 0, {back}});
  CostParams cpu;
  cpu.reduce_bandwidth = 5e9;
  ASSERT_EQ(cpu.slice_progress, SliceProgress::PerSlice) << "the library's default";
  const double n = 1e8;  // large enough that the bytes decide
  const auto per_byte = [&](const Topology& topo, const CostParams& params) {
    return critical_path_cost(topo, base, 16, params).at(n) / n;
  };
  EXPECT_NEAR(per_byte(one.build(), cpu), 0.4e-9, 0.01e-9);
  EXPECT_LT(per_byte(two.build(), cpu), 0.25e-9) << "between machines only the sums are the core's";
  EXPECT_LT(per_byte(one.build(), CostParams{}), 0.15e-9) << "no reduction rate: the links alone";
  CostParams per_rank = cpu;
  per_rank.slice_progress = SliceProgress::PerRank;
  EXPECT_LT(per_byte(one.build(), per_rank), 0.4e-9) << "step by step: as before, no core work";
}

TEST(CriticalPath, NeverBelowTheFloorNorAboveTheStepByStepPrice) {
  testing::RandomTrees trees(20261129);
  CostParams measured;
  measured.hop_overhead = kMeasuredHopOverhead;
  measured.incast_loss = kMeasuredIncastLoss;
  CostParams incast;  // the step-by-step bound holds with the incast loss too
  incast.incast_loss = kMeasuredIncastLoss;
  int compared = 0;
  for (int i = 0; i < 30; ++i) {
    const auto topo = trees.next(24);
    const CostParams params = i % 2 == 0 ? measured : i % 4 == 1 ? incast : CostParams{};
    const auto floor = cost_floor(topo);
    for (const auto& row : algorithm_table()) {
      if (!row.critical_path || (row.unsuitable && !row.unsuitable(topo).empty())) continue;
      const ir::Schedule base = row.build(topo);
      for (const uint32_t slices : {1u, 2u, 4u, 16u}) {
        if (slices > 1 && !row.pipelines) continue;
        const auto cost = critical_path_cost(topo, base, slices, params);
        const auto steps = evaluate_schedule(topo, pipeline_slices(base, slices), params);
        for (const double n : {8.0, 65536.0, 1048576.0, 268435456.0}) {
          EXPECT_GE(cost.at(n), floor.at(n) * (1 - 1e-12)) << row.name << "@" << slices << " " << topo.name() << " n " << n;
          // (The progress thread's overheads are the critical path's alone: without them it
          // never costs more than the steps added up.)
          if (params.hop_overhead == 0) {
            EXPECT_LE(cost.at(n), steps.at(n) * (1 + 1e-12)) << row.name << "@" << slices << " " << topo.name() << " n " << n;
          }
        }
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 100);
}

TEST(CriticalPath, ThePlannerPredictAndThePlansPriceUseIt) {
  PlanOptions options;
  options.cost.hop_overhead = kMeasuredHopOverhead;
  options.prune_unwinnable = false;  // priced even where another row wins every size
  const auto topo = testing::machines({2, 2, 2, 2, 2, 2}, testing::kPcie, testing::kEthernet);
  const auto report = build_plan_report(topo, options);
  const auto price = plan_price(report);
  bool found = false;
  for (const auto& candidate : report.candidates) {
    if (candidate.algorithm != "centre-tree@4") continue;
    found = true;
    ASSERT_TRUE(candidate.priced);
    EXPECT_EQ(candidate.priced_by, PricedBy::CriticalPath);
    const auto expected = critical_path_cost(topo, plan_centre_tree(topo), 4, options.cost);
    const auto predicted = predict_algorithm(topo, "centre-tree@4", options.cost);
    EXPECT_EQ(predicted.method, "critical path");
    for (const double n : {8.0, 65536.0, 1048576.0}) {
      EXPECT_DOUBLE_EQ(candidate.cost.at(n), expected.at(n));
      EXPECT_NEAR(predicted.time(n), expected.at(n), 1e-12 * expected.at(n));
    }
  }
  EXPECT_TRUE(found);
  for (const auto& [algorithm, cost] : price.racing) {
    if (algorithm == "centre-tree@4") {
      EXPECT_DOUBLE_EQ(cost.at(65536), critical_path_cost(topo, plan_centre_tree(topo), 4, options.cost).at(65536));
    }
  }
}

// A fixed schedule's price never rises when a link gets faster, step by step or per slice: the
// what-if property (docs/whatif.md, "Faster links, slower plans") counts slower plans, and they
// must come from the planner's choices, not from the pricing of one schedule.
TEST(CriticalPath, AFixedScheduleNeverGetsSlowerWithAFasterLink) {
  testing::RandomTrees trees(20261130);
  std::mt19937_64 rng(4142);
  CostParams params;
  params.hop_overhead = kMeasuredHopOverhead;
  params.incast_loss = kMeasuredIncastLoss;
  int compared = 0;
  for (int i = 0; i < 40; ++i) {
    const auto topo = trees.next(12);
    const std::string targets[] = {"link:" + topo.full_name(std::uniform_int_distribution<int>(1, topo.num_nodes() - 1)(rng)),
                                   "machines", "learners", "all"};
    const double factors[] = {1.5, 2, 4, 10};
    const std::string text = fmt::format("{}.{}*=1,{}", targets[i % 4 == 0 ? 1 + i / 4 % 3 : 0], i % 3 == 2 ? "latency" : "bandwidth",
                                         i % 3 == 2 ? 0.25 : factors[std::uniform_int_distribution<int>(0, 3)(rng)]);
    const std::vector<whatif::Variation> variations{whatif::parse_variation(text)};
    std::optional<Topology> faster;
    try {
      faster.emplace(whatif::to_topology(whatif::vary(whatif::editable_copy(topo), variations, whatif::grid_point(variations, 1))));
    } catch (const whatif::VariationError&) {
      continue;  // (no link of the tree in the class)
    }
    for (const auto& row : algorithm_table()) {
      if (!row.critical_path || (row.unsuitable && !row.unsuitable(topo).empty())) continue;
      const ir::Schedule base = row.build(topo);
      for (const uint32_t slices : {1u, 4u, 16u}) {
        if (slices > 1 && !row.pipelines) continue;
        for (const SliceProgress progress : {SliceProgress::PerRank, SliceProgress::PerSlice}) {
          const auto was = critical_path_cost(topo, base, slices, params, progress);
          const auto is = critical_path_cost(*faster, base, slices, params, progress);
          for (const double n : {8.0, 65536.0, 1048576.0, 268435456.0})
            EXPECT_LE(is.at(n), was.at(n) * (1 + 1e-12))
                << row.name << "@" << slices << (progress == SliceProgress::PerSlice ? " per slice " : " per rank ")
                << topo.name() << " " << text << " n " << n;
          ++compared;
        }
      }
    }
  }
  EXPECT_GT(compared, 100);
}

}  // namespace
}  // namespace flexplan
