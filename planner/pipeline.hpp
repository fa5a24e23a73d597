// Pipelining a schedule: the vector is cut into `slices` equal slices that go through the
// schedule's steps one step apart, so that step t runs step t - j of slice j for every j. The
// slices touch disjoint ranges, so a step's ops still read disjoint data; what changes is that
// the levels of a tree (and a reduce-scatter and the all-gather after it) work at once, each on
// its own slice. A schedule of m steps becomes m + slices - 1 steps, each moving 1/slices of the
// data, so the bandwidth term approaches the busiest link's total load instead of the sum of
// every step's busiest link, at the price of more steps' latency.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "ir/plan.hpp"
#include "planner/cost_model.hpp"
#include "topology/topology.hpp"

namespace flexplan {

// Throws std::invalid_argument when units * slices does not fit in 64 bits.
ir::Schedule pipeline_slices(const ir::Schedule&, uint32_t slices);

// Prices pipeline_slices(base, slices) without building it. Step t of the pipelined schedule
// holds base steps max(0, t - slices + 1) .. min(t, m - 1), each op on 1/slices of its base
// range; the evaluator prices such a step as the union of those base steps' ops at n / slices
// bytes. Only a few distinct windows occur (prefixes while the pipeline fills, suffixes while
// it drains, and the full window, or sliding windows when slices < m), so the cost of pricing
// every slice count is a few times that of the base, not the sum of the variants' sizes. The
// windows' prices are kept in the pricer and shared between slice counts.
class PipelinePricer {
 public:
  PipelinePricer(const Topology&, const ir::Schedule& base, const CostParams&);
  // Equal (up to rounding) to evaluate_schedule(topo, pipeline_slices(base, slices), params).
  ScheduleCost cost(uint32_t slices);
  // The group members cost(slices) would price that are not priced yet: the work it takes.
  uint64_t work(uint32_t slices) const;

 private:
  const StepCost& window(size_t first, size_t last);  // base steps first..last, unscaled
  // The distinct windows of a pipeline of `slices`, with how many steps each stands for.
  std::vector<std::pair<std::pair<size_t, size_t>, uint64_t>> windows(uint32_t slices) const;

  const Topology& topo_;
  const ir::Schedule& base_;
  CostParams params_;
  std::map<std::pair<size_t, size_t>, StepCost> windows_;
  std::vector<uint64_t> members_before_;  // group members of base steps 0 .. s-1
};

}  // namespace flexplan
