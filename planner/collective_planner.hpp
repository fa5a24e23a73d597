// Planning reduce-scatter, all-gather, broadcast and reduce: one row per algorithm naming the
// collectives it serves, and a race of the rows' price curves per collective and root whose
// cheapest pieces become the plan's schedules. All-reduce keeps its own planner
// (plan_builder.hpp); build_plan_report calls this one for the other collectives it is asked for.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "ir/plan.hpp"
#include "planner/algorithms.hpp"
#include "planner/cost_model.hpp"
#include "planner/floor.hpp"
#include "topology/topology.hpp"

namespace flexplan {

struct CollectiveRow {
  std::string_view name;
  std::string_view summary;  // one line, for --help and the plan summary
  // The collectives served: all-gather rows serve reduce-scatter by their transpose, broadcast
  // rows reduce.
  bool sharded = false;  // all-gather and reduce-scatter (else broadcast and reduce)
  // The copying form (all-gather, or broadcast from root); the planner transposes it for the
  // combining collective.
  ir::Schedule (*build)(const Topology&, int32_t root) = nullptr;
  // Ops, without building (exact or an upper bound), to leave out schedules too big to build.
  uint64_t (*ops)(const Topology&) = nullptr;
  // Group members summed over ops, likewise (null: twice the ops).
  uint64_t (*members)(const Topology&) = nullptr;
  // Slice counts tried beside the plain schedule (compact pipelines; broadcast and reduce
  // only: slices would cut a sharded collective's shards).
  uint32_t max_slices = 1;
  // Why the row is left out of this tree's race (empty or null: raced).
  std::string (*unsuitable)(const Topology&) = nullptr;
  bool serves(ir::Collective c) const {
    return sharded ? ir::has_shards(c) : ir::has_root(c);
  }
};
// The race prices a row by routing every hop of its schedule (evaluate_schedule): a hop of a
// chain op is walked about five times (its latency, the step's load, its steady pace, its
// round's load and its first-chunk pace), a one-hop op's about twice, which measured here as
// about 0.07 us a member of the ring and 0.25-0.33 us one of machine-chains. A row's pricing
// work is counted as its group members plus three times those beyond two an op (estimated from
// `ops` and `members`); a row past this budget is left out with a note, as long as another row
// of the collective is within it. On the generated 16k-learner tree that is machine-chains
// (about 57 million), which took 3-5 s of the all-gather race and won no size
// (docs/planning-speed.md); the ring at its largest within the limits (P of about 2,800) counts
// 16 million.
inline constexpr uint64_t kCollectivePricingWork = 32'000'000;
std::span<const CollectiveRow> collective_table();
// The names of the rows serving `collective`, in table order.
std::vector<std::string> collective_algorithm_names(ir::Collective);

// "ring" or "chain@8" for a collective: the schedule, built (and transposed where the
// collective combines). Throws std::invalid_argument for a name no row of that collective has.
ir::Schedule plan_collective_algorithm(const Topology&, ir::Collective, std::string_view name,
                                       int32_t root = 0);

// Checks a name as plan_collective_algorithm would, without building: throws the same error.
void plan_collective_algorithm_name_check(ir::Collective, std::string_view name);

struct CollectiveCandidate {
  std::string algorithm;           // "binomial-tree@4"
  std::string left_out_because;    // non-empty: not raced
  ScheduleCost cost;               // when raced
  // When it serves a size range of the plan; the others' are dropped after the race (a large
  // tree's losers would otherwise be held, at M^2 ops, until the plan is written).
  ir::Schedule schedule;
};

struct CollectivePlan {
  ir::Collective collective = ir::Collective::AllGather;
  int32_t root = 0;
  std::vector<CollectiveCandidate> candidates;
  std::vector<ir::Schedule> schedules;  // the cheapest per size range, ranges set
  CostFloor floor;
  // The candidate whose schedule serves an n-byte call.
  const CollectiveCandidate& chosen(uint64_t bytes) const;
};

// Races every row serving the collective (or only `algorithms` among them, when any of those
// names a row of it) and keeps the cheapest per size range. Reduce-scatter and reduce are the
// race of their copying mirror (all-gather, broadcast) transposed: each candidate is priced as
// the mirror's where its transpose costs the same (transposes_at_same_price), else its
// transpose is priced; only the winners are transposed.
CollectivePlan plan_collective(const Topology&, ir::Collective, int32_t root,
                               std::span<const std::string> algorithms, const CostParams&);

// The collectives other than all-reduce that `options.collectives` asks for (broadcast and
// reduce for each of `options.roots`), as plan_collective plans them, but a copying collective
// and its transpose from one race. In collective order, then root order; progress told as
// each race ends.
// With PlanOptions::leave_out_unbuildable, a collective none of whose rows fits the schedule
// limits is left out, and why goes to `left_out` ("allgather: ..."), instead of failing.
struct PlanOptions;
std::vector<CollectivePlan> plan_other_collectives(const Topology&, const PlanOptions&,
                                                   std::vector<std::string>* left_out = nullptr);

// No row of a collective fits the schedule limits on this tree.
struct CollectiveBeyondLimits : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Whether the evaluator prices the transpose of a copying schedule (transpose_copies) as the
// schedule itself, up to rounding: reductions are not priced, and the transpose's first-chunk
// rounds hold the same hops reversed, which holds where every op of a step (of a pipeline's
// base, where it is sliced) runs through as many hops. True of every row of the table but the
// relay trees (a step holds chains as long as each branch's fan-out), whose transposes are priced.
bool transposes_at_same_price(const ir::Schedule& copies, const CostParams&);

// Lower bounds for the collective (docs/cost-model.md, "Floors of the other collectives"):
// all-gather and reduce-scatter, max(k, P - k) n / P over the link above every subtree of k
// learners and (M - 1) n over the sum of a branch's M groups' cuts; broadcast and reduce, n
// over every separating link and (M - 1) n over the sum of the cuts; the latency floor is the
// diameter latency (all-gather, reduce-scatter) or the farthest learner from the root. All-reduce:
// cost_floor.
CostFloor collective_floor(const Topology&, ir::Collective, int32_t root = 0);

}  // namespace flexplan
