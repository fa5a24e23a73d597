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

// The distinct windows of a pipeline of `slices` slices over a base of `steps` steps: base steps
// first..last, with how many of the pipeline's steps each stands for (see PipelinePricer).
std::vector<std::pair<std::pair<size_t, size_t>, uint64_t>> pipeline_windows(size_t steps,
                                                                              uint32_t slices);
// The work of pricing the windows of a pipeline of `slices` from `before` (by base step s, the
// work of pricing steps 0 .. s - 1; PipelinePricer::work_before), leaving out the windows
// `priced` says are done and, unless `single_steps`, the windows of one base step.
template <typename Priced>
uint64_t pipeline_windows_work(const std::vector<uint64_t>& before, uint32_t slices, bool single_steps,
                               Priced&& priced) {
  uint64_t work = 0;
  for (const auto& [window, repeat] : pipeline_windows(before.size() - 1, slices))
    if (!priced(window) && (single_steps || window.first != window.second))
      work += before[window.second + 1] - before[window.first];
  return work;
}

// ir::expand_pipeline (ir/pipeline_form.hpp). Throws std::invalid_argument when units * slices
// does not fit in 64 bits.
ir::Schedule pipeline_slices(const ir::Schedule&, uint32_t slices);

// Prices pipeline_slices(base, slices) without building it. Step t of the pipelined schedule
// holds base steps max(0, t - slices + 1) .. min(t, m - 1), each op on 1/slices of its base
// range; the evaluator prices such a step as the union of those base steps' ops at n / slices
// bytes. Only a few distinct windows occur (prefixes while the pipeline fills, suffixes while
// it drains, and the full window, or sliding windows when slices < m), so the cost of pricing
// every slice count is a few times that of the base, not the sum of the variants' sizes. The
// windows' prices are kept in the pricer and shared between slice counts. The base's ops are
// lowered to hops and their link loads summed once per step (and per chain round); a window
// adds its steps' loads and walks only the paths of hops in chains of two hops or more.
class PipelinePricer {
 public:
  PipelinePricer(const Topology&, const ir::Schedule& base, const CostParams&);
  // Equal (up to rounding) to evaluate_schedule(topo, pipeline_slices(base, slices), params).
  ScheduleCost cost(uint32_t slices);
  // The work cost(slices) would do on windows not priced yet, in units of one walk of a chain
  // hop's path (a window walks each hop of its chains twice, and adds every link load of its
  // steps; kLoadEntriesPerWork such additions count as one walk). Schedules of star ops have no
  // chains, so their pipelines cost little to price whatever their size.
  // With `single_steps` false, windows of one base step are not counted: those are the base's
  // own steps, which pricing the base prices (the planner counts the same work whether or not
  // it priced the base first).
  uint64_t work(uint32_t slices, bool single_steps = true) const;
  // The same measure for pricing each base step once (what one slice's run costs).
  uint64_t base_work() const { return work_before_.back(); }
  // By base step s, the work of pricing steps 0 .. s - 1 (schedule_floors finds the same).
  const std::vector<uint64_t>& work_before() const { return work_before_; }
  static constexpr uint64_t kLoadEntriesPerWork = 8;
  // Seconds per message byte of the busiest link direction under all base steps' loads at
  // once: every pipeline of the base takes at least this times the message size.
  double busiest_total();
  // Each base step's floor as schedule_floors finds it (its busiest link direction, its slowest
  // hop, its slowest chain's latency as a chain of share 0), from the loads gathered here.
  std::vector<StepCost> step_floors() const;
  // Link directions walked gathering the base steps' loads (the first walk, in op order).
  uint64_t links_walked() const { return links_walked_; }

 private:
  // A hop of a base step, lowered once: its ends, its round, and the index of its chain among
  // the step's chains (-1: not part of a chain of two hops or more).
  struct Hop {
    NodeId from, to;
    uint32_t round;
    int32_t chain;
  };
  // A base step's link loads (fraction of the message per link direction, direction 2 * node
  // for the node's uplink going up, 2 * node + 1 going down; with a reduce bandwidth, 2 * nodes
  // + node for the learner's reductions), summed once, so that a window's loads are the sums of
  // its steps' loads instead of a walk over every hop of the window.
  using SparseLoads = std::vector<std::pair<uint32_t, double>>;
  struct BaseStep {
    SparseLoads loads;
    std::vector<SparseLoads> round_loads;  // by round; empty without chains (all is round 0)
    std::vector<Hop> chain_hops;           // by round
    std::vector<ChainCost> chains;         // latency and share set
    double hop_latency = 0;
  };

  const StepCost& window(size_t first, size_t last);  // base steps first..last, unscaled
  void add(const SparseLoads&);
  void clear_loads();
  double busiest_on_path(NodeId a, NodeId b) const;

  CostParams params_;
  std::vector<NodeId> parent_;
  std::vector<int> depth_;
  std::vector<double> inverse_bandwidth_;  // by direction
  std::vector<double> load_;               // by direction, the window's being priced
  std::vector<uint32_t> touched_;
  double busiest_ = 0;
  std::vector<BaseStep> steps_;
  std::map<std::pair<size_t, size_t>, StepCost> windows_;
  std::vector<uint64_t> work_before_;  // pricing work of base steps 0 .. s-1 (work())
  uint64_t links_walked_ = 0;
};

}  // namespace flexplan
