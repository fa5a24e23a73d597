// The sparse all-reduce's cost on trees (planner/sparse_cost.hpp): the generalised Eq. 7-10 by
// hand on small trees, and the break-even density against a dense time.
#include <gtest/gtest.h>

#include <cmath>

#include "planner/sparse_cost.hpp"
#include "tests/unit/planner_test_trees.hpp"

namespace flexplan {
namespace {

using testing::kEthernet;
using testing::kPcie;

TEST(SparseCost, TwoPlusThreeByHand) {
  const Topology topo = testing::machines({2, 3});
  const double bytes = 4e6, element = 4, density = 0.01;
  SparseCostParams params;
  params.mstopk_seconds_per_element = 2e-9;
  const SparseCost cost = sparse_allreduce_cost(topo, bytes, element, density, {}, params);
  // Step 1: the 3-learner machine, 2/3 of the vector over a PCIe link, two learner latencies.
  EXPECT_NEAR(cost.reduce_scatter, 2 * kPcie.latency + 2.0 / 3.0 * bytes / kPcie.bandwidth, 1e-12);
  EXPECT_DOUBLE_EQ(cost.all_gather, cost.reduce_scatter);
  // MSTopK on the largest slice, half the vector's 1e6 elements.
  EXPECT_NEAR(cost.topk, 0.5e6 * 2e-9, 1e-15);
  // Step 3: each machine's Ethernet link carries 1 x (1 - 1) ... m_v (m - m_v) = 1 x 1 times
  // density * count pairs of 8 bytes; latency: learner to root and back.
  const double pairs = density * 1e6;
  EXPECT_NEAR(cost.exchange, 2 * (kPcie.latency + kEthernet.latency) + pairs * 8 / kEthernet.bandwidth, 1e-12);
}

TEST(SparseCost, StepOneSumsAtTheReductionRateAndStepFourDoesNot) {
  const Topology topo = testing::machines({2, 3});
  const double bytes = 4e6;
  CostParams cost_params;
  cost_params.reduce_bandwidth = 1e9;
  const SparseCost free = sparse_allreduce_cost(topo, bytes, 4, 0.01);
  const SparseCost priced = sparse_allreduce_cost(topo, bytes, 4, 0.01, cost_params);
  // The 3-learner machine sums the two parts of its slice it received: 2/3 of the vector,
  // after they arrived (the runtime receives every part, then sums).
  EXPECT_NEAR(priced.reduce_scatter, free.reduce_scatter + 2.0 / 3.0 * bytes / 1e9, 1e-12);
  EXPECT_DOUBLE_EQ(priced.all_gather, free.all_gather);
  EXPECT_DOUBLE_EQ(priced.exchange, free.exchange);
}

TEST(SparseCost, ExchangeGrowsWithMachinesAndDensity) {
  const double bytes = 32e6;
  const auto two = sparse_allreduce_cost(testing::machines({2, 3}), bytes, 4, 0.01);
  const auto three = sparse_allreduce_cost(testing::machines({3, 3, 4}), bytes, 4, 0.01);
  // The middle machine's link carries 1 x 2 machines' pairs instead of 1 x 1.
  EXPECT_GT(three.exchange, two.exchange);
  EXPECT_GT(sparse_allreduce_cost(testing::machines({2, 3}), bytes, 4, 0.05).exchange, two.exchange);
  // One machine: no exchange at all.
  EXPECT_EQ(sparse_allreduce_cost(testing::machines({4}), bytes, 4, 0.01).exchange, 0.0);
}

TEST(SparseCost, RacksMergeTheirPairsBeforeTheSpine) {
  // Two racks of two 1-learner machines behind a slow spine.
  const Link spine{0.5e9, 20e-6};
  const Topology topo = testing::symmetric({2, 2, 1}, {spine, kEthernet, kPcie});
  const double bytes = 32e6, count = bytes / 4, density = 0.01, pair = 8;
  const double two = 1 - std::pow(1 - density, 2), four = 1 - std::pow(1 - density, 4);
  // Up within each rack (one machine's pairs to the other's, over the Ethernet links), up across
  // the spine (each rack's merged pairs, both ways), down within each rack (all four merged).
  const double within = 2 * (kPcie.latency + kEthernet.latency);
  const double across = within + 2 * spine.latency;
  const double want = within + density * count * pair / kEthernet.bandwidth +  //
                      across + two * count * pair / spine.bandwidth +         //
                      within + four * count * pair / kEthernet.bandwidth;
  EXPECT_NEAR(sparse_allreduce_cost(topo, bytes, 4, density).exchange, want, want * 1e-12);
}

TEST(SparseCost, BreakEvenDensityIsWhereTheTimesMeet) {
  const Topology topo = testing::machines({2, 3});
  const double bytes = 32e6;
  const double dense = 2 * bytes / kEthernet.bandwidth;  // a dense time on the slow link
  const auto rho = sparse_break_even_density(topo, bytes, 4, dense);
  ASSERT_TRUE(rho.has_value());
  ASSERT_GT(*rho, 0.0);
  ASSERT_LT(*rho, 1.0);
  EXPECT_NEAR(sparse_allreduce_cost(topo, bytes, 4, *rho).total(), dense, dense * 1e-9);
  EXPECT_FALSE(sparse_break_even_density(topo, bytes, 4, 1e-9).has_value());  // never wins
  EXPECT_EQ(sparse_break_even_density(topo, bytes, 4, 1e3).value(), 1.0);     // always wins
}

}  // namespace
}  // namespace flexplan
