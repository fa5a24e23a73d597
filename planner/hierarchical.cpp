// Hierarchical all-reduce, the classic cloud baseline: every machine (a parent of learners)
// reduces to one leader, the lowest rank among its learners; the leaders ring-all-reduce;
// each leader broadcasts the result to its machine. Non-leaders idle during the middle phase.
#include <utility>
#include <vector>

#include "planner/algorithms.hpp"
#include "planner/machines.hpp"
#include "planner/ring_steps.hpp"

namespace flexplan {
namespace {

// One op per machine with more than one learner, over the whole vector.
ir::Step local_step(const std::vector<Machine>& machines, ir::OpKind kind, uint64_t units) {
  ir::Step step{kind == ir::OpKind::Reduce ? ir::Phase::Reduce : ir::Phase::Broadcast, 0, {}};
  for (const Machine& machine : machines) {
    if (machine.learners.size() < 2) continue;
    ir::Op op;
    op.kind = kind;
    op.begin = 0;
    op.end = units;
    op.root = machine.leader;
    op.group = machine.learners;
    step.ops.push_back(std::move(op));
  }
  return step;
}

}  // namespace

ir::Schedule plan_hierarchical(const Topology& topo) {
  const auto machines = machines_of(topo);
  RingSpec leaders;
  for (const Machine& machine : machines) leaders.members.push_back(machine.leader);
  leaders.begin = 0;
  leaders.end = leaders.members.size();

  ir::Schedule schedule;
  schedule.algorithm = "hierarchical";
  schedule.collective = ir::Collective::AllReduce;
  schedule.units = leaders.end;  // one unit per leader-ring chunk
  auto reduce = local_step(machines, ir::OpKind::Reduce, schedule.units);
  if (!reduce.ops.empty()) schedule.steps.push_back(std::move(reduce));
  const RingSpec rings[] = {leaders};
  const int32_t top = topo.num_levels() - 1;
  append_ring_reduce_scatter(schedule.steps.edit(), rings, top);
  append_ring_all_gather(schedule.steps.edit(), rings, top);
  auto broadcast = local_step(machines, ir::OpKind::Broadcast, schedule.units);
  if (!broadcast.ops.empty()) schedule.steps.push_back(std::move(broadcast));
  return schedule;
}

}  // namespace flexplan
