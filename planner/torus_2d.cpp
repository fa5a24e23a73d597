// The 2D-torus all-reduce of the public-cloud top-k paper, for grid-shaped clusters (every
// machine with the same number k of learners): a ring reduce-scatter inside each machine, k
// ring all-reduces across machines at once (the learners with the same local index, each on
// the 1/k of the vector it owns), and a ring all-gather inside each machine.
#include <fmt/core.h>

#include "planner/algorithms.hpp"
#include "planner/machines.hpp"
#include "planner/ring_steps.hpp"

namespace flexplan {

std::string torus_2d_unsuitable(const Topology& topo) {
  const auto machines = machines_of(topo);
  for (const Machine& machine : machines)
    if (machine.learners.size() != machines.front().learners.size())
      return fmt::format("not a grid: machines of {} and {} learners",
                         machines.front().learners.size(), machine.learners.size());
  if (machines.size() < 2 || machines.front().learners.size() < 2)
    return "not a grid: it needs two machines of two learners or more";
  return "";
}

ir::Schedule plan_torus_2d(const Topology& topo) {
  const auto machines = machines_of(topo);
  const size_t k = machines.front().learners.size(), m = machines.size();
  ir::Schedule schedule;
  schedule.algorithm = "torus-2d";
  schedule.collective = ir::Collective::AllReduce;
  schedule.units = k * m;
  std::vector<RingSpec> local;
  for (const Machine& machine : machines) local.push_back({machine.learners, 0, schedule.units});
  // After the local reduce-scatter the learner at local index i owns chunk i: [i m, (i+1) m).
  std::vector<RingSpec> across;
  for (size_t i = 0; i < k; ++i) {
    RingSpec ring{{}, i * m, (i + 1) * m};
    for (const Machine& machine : machines) ring.members.push_back(machine.learners[i]);
    across.push_back(std::move(ring));
  }
  const int32_t top = topo.num_levels() - 1;
  append_ring_reduce_scatter(schedule.steps.edit(), local, 0);
  append_ring_reduce_scatter(schedule.steps.edit(), across, top);
  append_ring_all_gather(schedule.steps.edit(), across, top);
  append_ring_all_gather(schedule.steps.edit(), local, 0);
  return schedule;
}

}  // namespace flexplan
