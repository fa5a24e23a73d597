// Hierarchical all-reduce, the classic cloud baseline: every machine (a parent of learners)
// reduces to one leader, the lowest rank among its learners; the leaders ring-all-reduce;
// each leader broadcasts the result to its machine. Non-leaders idle during the middle phase.
#include <algorithm>
#include <vector>

#include "planner/algorithms.hpp"
#include "planner/ring_steps.hpp"

namespace flexplan {
namespace {

// The learners of each machine in depth-first order, machines in depth-first order too.
std::vector<std::vector<int32_t>> machines_of(const Topology& topo) {
  std::vector<std::vector<int32_t>> machines;
  std::vector<int> machine_index(topo.num_nodes(), -1);
  for (int rank : topo.learners_under(topo.root())) {
    const NodeId machine = topo.parent(topo.learner_node(rank));
    if (machine_index[machine] < 0) {
      machine_index[machine] = static_cast<int>(machines.size());
      machines.emplace_back();
    }
    machines[machine_index[machine]].push_back(rank);
  }
  return machines;
}

// One op per machine with more than one learner, over the whole vector.
ir::Step local_step(const std::vector<std::vector<int32_t>>& machines, ir::OpKind kind,
                    uint64_t units) {
  ir::Step step{kind == ir::OpKind::Reduce ? ir::Phase::Reduce : ir::Phase::Broadcast, 0, {}};
  for (const auto& learners : machines) {
    if (learners.size() < 2) continue;
    ir::Op op;
    op.kind = kind;
    op.begin = 0;
    op.end = units;
    op.root = *std::min_element(learners.begin(), learners.end());
    op.group = learners;
    step.ops.push_back(std::move(op));
  }
  return step;
}

}  // namespace

ir::Schedule plan_hierarchical(const Topology& topo) {
  const auto machines = machines_of(topo);
  RingSpec leaders;
  for (const auto& learners : machines)
    leaders.members.push_back(*std::min_element(learners.begin(), learners.end()));
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
  append_ring_reduce_scatter(schedule.steps, rings, top);
  append_ring_all_gather(schedule.steps, rings, top);
  auto broadcast = local_step(machines, ir::OpKind::Broadcast, schedule.units);
  if (!broadcast.ops.empty()) schedule.steps.push_back(std::move(broadcast));
  return schedule;
}

}  // namespace flexplan
