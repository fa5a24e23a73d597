// A lower bound of a schedule's price, in one walk over its hops: what the planner leaves a base
// out on before pricing it (plan_builder.cpp, "Pruning what cannot win" in docs/planner.md).
#pragma once

#include "ir/plan.hpp"
#include "planner/cost_model.hpp"
#include "planner/pipeline.hpp"
#include "topology/topology.hpp"

namespace flexplan {

struct ScheduleFloors {
  // One step per schedule step: its busiest link direction (per_byte, the learners'
  // reductions included, as in the evaluator), its slowest hop (hop_latency), and its slowest
  // chain's latency as a chain of share 0. A step's price is at least its bandwidth term plus
  // its slowest hop, and at least its slowest chain's latency, so the floors are at most
  // evaluate_schedule's price at every size.
  ScheduleCost cost;
  // Seconds per message byte on the busiest link direction under all steps' loads at once
  // (PipelinePricer::busiest_total).
  double busiest_total = 0;
  // Link directions walked, summed over every hop: what finding the floors cost, and a measure
  // of what pricing the schedule from its windows would (which walks each chain hop again).
  uint64_t links_walked = 0;
  // By step s, at most the work PipelinePricer counts for pricing steps 0 .. s - 1
  // (pricing_work_before, which needs a second walk): the chain hops and chains exactly, each
  // step's link directions once for the step and once for its rounds. Enough to leave out a
  // variant that is over its pricing budget without counting exactly.
  std::vector<uint64_t> work_before_at_least;
};

// Each hop's path is walked once, in the schedule's order, and nothing is kept per round or per
// chain hop, unlike the PipelinePricer, whose construction costs several times this on
// schedules of long chains.
// Throws std::invalid_argument naming the step and op where an op names a rank the topology
// does not have.
ScheduleFloors schedule_floors(const Topology&, const ir::Schedule&, const CostParams&);

// The same floors from a pricer built over the schedule, without walking its hops again: for a
// base the planner builds the pricer of anyway (plan_builder.cpp). Equal to schedule_floors' up
// to rounding, with the exact work in work_before_at_least.
ScheduleFloors floors_from_pricer(PipelinePricer&, const CostParams&);

// By step s, the work PipelinePricer counts for pricing steps 0 .. s - 1
// (PipelinePricer::work_before), without building the pricer: a planner that left the base out
// on its floors charges its variants the same pricing work. One more walk over the hops' paths,
// in order of round within each step (several times slower than schedule_floors' walk in the
// schedule's order on big trees, so only done where a variant's work is asked for).
std::vector<uint64_t> pricing_work_before(const Topology&, const ir::Schedule&, const CostParams&);

}  // namespace flexplan
