// Pipelined variants priced from their base schedule's windows (PipelinePricer) cost what the
// evaluator says of the built variant (pipeline_slices), on random trees, for every pipelining
// algorithm and slice counts below, equal to and above the base's step count, with and
// without reductions modelled.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "ir/pipeline_form.hpp"
#include "planner/algorithm_table.hpp"
#include "planner/algorithms.hpp"
#include "planner/cost_model.hpp"
#include "planner/pipeline.hpp"
#include "planner/plan_builder.hpp"
#include "planner/schedule_floors.hpp"
#include "planner_test_trees.hpp"

namespace flexplan {
namespace {

TEST(PipelinePricer, WindowsPriceWhatTheSlicedScheduleCosts) {
  testing::RandomTrees trees(8675309);
  // The default parameters, a hop overhead with small chunks, where chains decide more steps'
  // prices, and reductions modelled (slower than many of the trees' links).
  CostParams small_chunks;
  small_chunks.hop_overhead = 2e-6;
  small_chunks.chunk_bytes = 4096;
  CostParams reducing;
  reducing.reduce_bandwidth = 1e9;
  // and the star ops' incast loss priced (every fourth tree, and with the small chunks on
  // every other odd one).
  CostParams incast;
  incast.incast_loss = kMeasuredIncastLoss;
  CostParams small_chunks_incast = small_chunks;
  small_chunks_incast.incast_loss = 0.5;
  int compared = 0;
  for (int i = 0; i < 40; ++i) {
    const auto topo = trees.next();
    const CostParams params = i % 4 == 1   ? small_chunks
                              : i % 4 == 3 ? small_chunks_incast
                              : i % 4 == 2 ? reducing
                              : i % 8 == 4 ? incast
                                           : CostParams{};
    for (const auto& row : algorithm_table()) {
      if (!row.pipelines || (row.unsuitable && !row.unsuitable(topo).empty())) continue;
      const ir::Schedule base = row.build(topo);
      PipelinePricer pricer(topo, base, params);
      const uint32_t m = static_cast<uint32_t>(base.steps.size());
      // One slice: the base itself, priced step by step (the planner prices bases so). Both
      // sides thin a step's chains at power-of-two message sizes (make_step), the windows
      // before scaling by 1 / slices: with small chunks, where chains decide, the two thinnings
      // keep the same chains only for power-of-two slice counts, the ones the planner races
      // (kPipelineSlices); with other counts the prices can differ by the thinning's error.
      const bool any_slices = i % 2 == 0;
      for (uint32_t slices : {1u, 2u, 3u, 4u, m, m + 5, 64u}) {
        if (!any_slices && (slices & (slices - 1)) != 0) continue;
        const auto windows = pricer.cost(slices);
        const auto built = evaluate_schedule(topo, pipeline_slices(base, slices), params);
        EXPECT_EQ(windows.step_count(), built.step_count());
        for (double n : {8.0, 3e5, 5e7, 4e9}) {
          const double expected = built.at(n);
          EXPECT_NEAR(windows.at(n), expected, 1e-9 * expected)
              << row.name << "@" << slices << " tree " << i << " n " << n;
        }
        ++compared;
      }
      EXPECT_EQ(pricer.work(m + 5), 0u) << "every window of a deep pipeline is priced once";
      // The floors the planner leaves a base out on (PlanOptions::prune_unwinnable) are a
      // lower bound of the base's price at every size, and their pace of the pricer's.
      const ScheduleFloors floors = schedule_floors(topo, base, params);
      const ScheduleCost priced = pricer.cost(1);
      // A variant of a base left out is bounded from the floors.
      for (uint32_t slices : {2u, 4u, 16u, 64u})
        for (double n : {0.0, 8.0, 3e5, 5e7, 4e9}) {
          const double bound = pipeline_lower_bound(floors.cost, floors.busiest_total, slices, n);
          EXPECT_LE(bound, pricer.cost(slices).at(n) * (1 + 1e-9) + 1e-8)
              << row.name << "@" << slices << " tree " << i << " n " << n;
        }
      EXPECT_EQ(floors.cost.step_count(), priced.step_count());
      // (The slowest chain's latency holds up to what one byte adds to a chain: the evaluator
      // keeps the chain slowest at 1 byte, nanoseconds.)
      for (double n = 0; n < 1e13; n = n == 0 ? 1 : n * 1.9)
        EXPECT_LE(floors.cost.at(n), priced.at(n) * (1 + 1e-12) + 1e-8)
            << row.name << " tree " << i << " n " << n;
      EXPECT_NEAR(floors.busiest_total, pricer.busiest_total(), 1e-9 * pricer.busiest_total())
          << row.name << " tree " << i;
      // The same floors from the pricer (what the planner uses for flexreduce-bw's base), up to
      // rounding, with the exact work per step.
      const ScheduleFloors from_pricer = floors_from_pricer(pricer, params);
      ASSERT_EQ(from_pricer.cost.steps.size(), floors.cost.steps.size());
      for (size_t s = 0; s < floors.cost.steps.size(); ++s) {
        const StepCost& a = from_pricer.cost.steps[s];
        const StepCost& b = floors.cost.steps[s];
        EXPECT_NEAR(a.per_byte, b.per_byte, 1e-12 * b.per_byte) << row.name << " tree " << i << " step " << s;
        EXPECT_NEAR(a.hop_latency, b.hop_latency, 1e-12 * b.hop_latency) << row.name << " tree " << i;
        ASSERT_EQ(a.chains.size(), b.chains.size()) << row.name << " tree " << i << " step " << s;
        if (!b.chains.empty()) {
          EXPECT_NEAR(a.chains[0].latency, b.chains[0].latency, 1e-12 * b.chains[0].latency);
        }
      }
      EXPECT_NEAR(from_pricer.busiest_total, floors.busiest_total, 1e-12 * floors.busiest_total);
      EXPECT_EQ(from_pricer.links_walked, floors.links_walked) << row.name << " tree " << i;
      EXPECT_EQ(from_pricer.work_before_at_least, pricer.work_before()) << row.name << " tree " << i;
      // The pricing work the planner charges a left-out base's variants is the pricer's own.
      const auto work_before = pricing_work_before(topo, base, params);
      EXPECT_EQ(work_before, pricer.work_before()) << row.name << " tree " << i;
      // The floors' bound of that work, step by step; exact where no step has a chain (a star's
      // hops are all in one round).
      ASSERT_EQ(floors.work_before_at_least.size(), work_before.size());
      bool chains = false;
      for (const auto& step : base.steps)
        for (const auto& op : step.ops) chains |= op.shape == ir::OpShape::Chain && op.group.size() >= 2;
      for (size_t s = 1; s < work_before.size(); ++s) {
        const uint64_t at_least = floors.work_before_at_least[s] - floors.work_before_at_least[s - 1];
        const uint64_t exact = work_before[s] - work_before[s - 1];
        EXPECT_LE(at_least, exact) << row.name << " tree " << i << " step " << s - 1;
        if (!chains) {
          EXPECT_EQ(at_least, exact) << row.name << " tree " << i << " step " << s - 1;
        }
      }
    }
  }
  EXPECT_GT(compared, 500);
}

// The evaluator prices a pipeline held compact step by step as its expansion, to the last bit
// (it reads the expansion's ops from the base in the expansion's order), on random trees for
// every pipelining algorithm.
TEST(PipelineEvaluator, CompactPipelinesCostWhatTheirExpansionCosts) {
  CostParams reducing;
  reducing.reduce_bandwidth = 1e9;
  reducing.hop_overhead = 2e-6;
  int compared = 0;
  testing::for_each_random_pipeline(20261124, 20, 40, [&](const Topology& topo, const ir::Schedule& base,
                                                         uint32_t slices, int tree) {
    const CostParams params = tree % 2 == 1 ? reducing : CostParams{};
    const auto compact = evaluate_schedule(topo, ir::compact_pipeline(base, slices), params);
    const auto whole = evaluate_schedule(topo, pipeline_slices(base, slices), params);
    ASSERT_EQ(compact.step_count(), whole.step_count());
    for (double n : {8.0, 3e5, 5e7, 4e9})
      EXPECT_EQ(compact.at(n), whole.at(n)) << base.algorithm << "@" << slices << " tree " << tree << " n " << n;
    ++compared;
  });
  EXPECT_GT(compared, 100);
}

TEST(PipelinePricer, DeepPipelinesShareTheirWindows) {
  testing::RandomTrees trees(4242);
  const auto topo = trees.next();
  const ir::Schedule base = plan_algorithm(topo, "flexreduce");
  PipelinePricer pricer(topo, base, {});
  const uint64_t first = pricer.work(256);
  EXPECT_GT(first, 0u);
  pricer.cost(256);
  for (uint32_t slices : {16u, 32u, 64u, 128u, 256u}) {
    if (slices < base.steps.size()) continue;
    EXPECT_EQ(pricer.work(slices), 0u) << slices;
  }
}

// The pricing work counts what pricing walks: the same ops as chains cost a window two walks per
// hop, as stars (no chains) only their link loads, at kLoadEntriesPerWork to a walk.
TEST(PipelinePricer, WorkCountsChainWalksNotStarMembers) {
  testing::TreeBuilder b;
  for (int m = 0; m < 4; ++m) {
    const NodeId box = b.add_switch(b.root(), "m" + std::to_string(m), Link{10e9, 1e-6});
    for (int g = 0; g < 4; ++g) b.add_learner(box, "g" + std::to_string(g), Link{100e9, 1e-6});
  }
  const Topology topo = b.build();
  ir::Schedule chains;
  chains.algorithm = "chains";
  chains.units = 16;
  chains.steps.edit().resize(2);
  for (uint64_t u = 0; u < 16; ++u) {
    ir::Op op{ir::OpKind::Reduce, u, u + 1, static_cast<int32_t>(u), {}};
    for (int32_t r = 0; r < 16; ++r) op.group.push_back(r);
    chains.steps.edit()[0].ops.push_back(op);
    op.kind = ir::OpKind::Broadcast;
    chains.steps.edit()[1].ops.push_back(op);
  }
  ir::Schedule stars = chains;
  for (auto& step : stars.steps.edit())
    for (auto& op : step.ops) op.shape = ir::OpShape::Star;
  const PipelinePricer chain_pricer(topo, chains, {}), star_pricer(topo, stars, {});
  // Each op of 16 members is a chain of 15 hops (the root is in the group), walked twice.
  EXPECT_GE(chain_pricer.base_work(), 2u * 2 * 16 * 15);
  EXPECT_LT(star_pricer.base_work(), chain_pricer.base_work() / 50);
  EXPECT_LT(star_pricer.work(256), chain_pricer.work(256) / 50);
}

}  // namespace
}  // namespace flexplan
