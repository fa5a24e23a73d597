// Ring all-reduce over every learner: the baseline of NCCL and MPI. The ring follows the
// depth-first order of the tree, which keeps each subtree's learners contiguous, so the ring
// enters and leaves every subtree exactly once: each uplink carries one chunk per step in each
// direction, the least any ring can do.
#include <algorithm>
#include <vector>

#include "planner/algorithms.hpp"
#include "planner/ring_steps.hpp"

namespace flexplan {

ir::Schedule plan_ring(const Topology& topo) {
  const auto order = topo.learners_under(topo.root());
  RingSpec ring;
  ring.members.assign(order.begin(), order.end());
  ring.begin = 0;
  ring.end = ring.members.size();  // one unit per chunk: the chunking is exact

  ir::Schedule schedule;
  schedule.algorithm = "ring";
  schedule.collective = ir::Collective::AllReduce;
  schedule.units = std::max<uint64_t>(ring.end, 1);
  const int32_t level = topo.num_levels() - 1;  // a ring crosses the root's links
  const RingSpec rings[] = {ring};
  append_ring_reduce_scatter(schedule.steps.edit(), rings, level);
  append_ring_all_gather(schedule.steps.edit(), rings, level);
  return schedule;
}

}  // namespace flexplan
