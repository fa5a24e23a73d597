// Topology-aware recursive doubling through one leader per machine: each machine (a parent of
// learners) reduces to its lowest rank in one star op over its fast local links, the leaders
// run recursive doubling across machines (ceil(log2 M) rounds), and each leader broadcasts to
// its machine in one star op.
#include "planner/algorithms.hpp"
#include "planner/machines.hpp"
#include "planner/recursive_doubling.hpp"

namespace flexplan {

ir::Schedule plan_rd_leader(const Topology& topo) {
  ir::Schedule schedule;
  schedule.algorithm = "rd-leader";
  schedule.collective = ir::Collective::AllReduce;
  schedule.units = 1;
  const auto machines = machines_of(topo);
  ir::Step reduce{ir::Phase::Reduce, 0, {}}, broadcast{ir::Phase::Broadcast, 0, {}};
  std::vector<int32_t> leaders;
  for (const Machine& machine : machines) {
    leaders.push_back(machine.leader);
    if (machine.learners.size() < 2) continue;
    ir::Op op{ir::OpKind::Reduce, 0, 1, machine.leader, machine.learners};
    op.shape = ir::OpShape::Star;
    reduce.ops.push_back(op);
    op.kind = ir::OpKind::Broadcast;
    broadcast.ops.push_back(std::move(op));
  }
  std::vector<std::vector<ir::Op>> rounds;
  append_recursive_doubling(leaders, 1, rounds);
  if (!reduce.ops.empty()) schedule.steps.push_back(std::move(reduce));
  for (size_t k = 0; k < rounds.size(); ++k)
    schedule.steps.push_back({ir::Phase::Reduce, static_cast<int32_t>(k + 1), std::move(rounds[k])});
  if (!broadcast.ops.empty()) schedule.steps.push_back(std::move(broadcast));
  return schedule;
}

}  // namespace flexplan
