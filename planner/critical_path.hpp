// Pricing a schedule by its critical path, the way the runtime runs it: a rank's step of slice j
// starts once its own step of slice j before and the data it receives are done
// (runtime/operation.hpp, Overlapping steps), not when every rank's step is, so a pipelined
// tree's slices overlap and its price is its longest dependency chain,
// not the sum of its steps (docs/cost-model.md, "The critical path").
#pragma once

#include <cstdint>
#include <optional>

#include "ir/plan.hpp"
#include "planner/cost_model.hpp"
#include "topology/topology.hpp"

namespace flexplan {

// The price of pipeline_slices(base, slices) (base held whole, slices >= 1) as a function of
// the message size: the larger of
//   - the latest time any rank finishes, where a rank starts step t at the time it finished
//     step t - 1; a hop's data leaves its sender when the sender starts the step and reaches
//     the receiver after the hop's latency (path latency, hop overhead, a star root's queue) and
//     its bytes at the pace of the busiest link direction on its path under the whole step's
//     load; a sender is done with a hop after its overheads and its bytes at that pace (sends
//     complete locally: the runtime sends every chunk eagerly); the k-th hop of a chain leaves
//     once the (k - 1)-th has arrived (store and forward, an upper bound for chunked ranges);
//     and a rank is busy for half a hop overhead per hop end it has in the step (one progress
//     thread posts and completes them one after another);
//   - the busiest link direction under every step's load at once (every slice's bytes cross
//     it), plus the slowest hop's latency;
//   - per slice, each rank's progress thread: its hop overheads, and its core's copies of its
//     hops inside its machine (sent and received) and its reductions, one after another.
// Exact as a function of n: every rank's finishing time is kept as the upper envelope of the
// lines (latency + n x seconds per byte) of its dependency chains. For schedules of star ops
// (and one-hop chains) never above evaluate_schedule of the same pipeline, except by the
// progress thread's overheads and (per slice) its core's work, which the evaluator leaves out (each step adds at most that
// step's price to any rank otherwise).
// The result is one StepCost: the bound above as its bandwidth term, the envelope's lines as
// chains of share 1 whose two paces are equal (linear in n whatever their chunk count).
// What a rank's step waits for besides the data it receives: CostParams::slice_progress
// (cost_model.hpp).
ScheduleCost critical_path_cost(const Topology&, const ir::Schedule& base, uint32_t slices,
                                const CostParams& = {});
ScheduleCost critical_path_cost(const Topology&, const ir::Schedule& base, uint32_t slices, const CostParams&,
                                SliceProgress);
// A schedule as built: a compact pipeline (ir/pipeline_form.hpp) is priced over its slices.
ScheduleCost critical_path_cost(const Topology&, const ir::Schedule& schedule, const CostParams& = {});

// critical_path_cost(base, slices) unless it compares or sorts envelope lines and walks the
// base's links more than `budget` times in all on the way (added to `work` either way): then
// null. A rank's envelope can hold a line per step of the pipeline, so the work grows faster
// than the pipeline's hops; the planner bounds it.
std::optional<ScheduleCost> critical_path_cost_within(const Topology&, const ir::Schedule& base, uint32_t slices,
                                                      const CostParams&, uint64_t budget, uint64_t& work);

// What a base's critical path must spend, counted once (a pass over its ops): its hops as
// lowered, and the ranks they touch counted once per step.
struct CriticalPathCounts {
  uint64_t hops = 0;
  uint64_t ranks_touched = 0;
  uint64_t last_step_ranks_touched = 0;  // by its last step
};
CriticalPathCounts critical_path_counts(const ir::Schedule& base, int learners);
// The least `work` critical_path_cost_within(base, slices) has counted at its last budget
// check, besides the links its lowering walks (the caller adds those where known): a budget
// below this is passed for certain, so the planner does not begin (tests: least_work at most
// the smallest budget that prices, per slice and per rank).
uint64_t critical_path_least_work(const CriticalPathCounts&, uint32_t slices, const CostParams&);

}  // namespace flexplan
