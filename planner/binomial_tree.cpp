// Binomial-tree all-reduce: a reduce to the first learner in depth-first order, then the
// mirror broadcast, ceil(log2 P) one-hop rounds each way; the pairs of the first rounds are
// neighbours in the tree. Sliced into a pipeline (binomial-tree@S), it is the pipelined tree.
#include "planner/algorithms.hpp"
#include "planner/recursive_doubling.hpp"

namespace flexplan {

ir::Schedule plan_binomial_tree(const Topology& topo) {
  ir::Schedule schedule;
  schedule.algorithm = "binomial-tree";
  schedule.collective = ir::Collective::AllReduce;
  schedule.units = 1;
  const auto order = topo.learners_under(topo.root());
  const size_t p = order.size();
  const int rounds = ceil_log2(p);
  for (int k = 0; k < rounds; ++k) {
    ir::Step step{ir::Phase::Reduce, k, {}};
    const size_t distance = size_t{1} << k;
    for (size_t i = distance; i < p; i += 2 * distance)
      step.ops.push_back({ir::OpKind::Reduce, 0, 1, order[i - distance], {order[i - distance], order[i]}});
    schedule.steps.push_back(std::move(step));
  }
  for (int k = rounds; k-- > 0;) {
    ir::Step step{ir::Phase::Broadcast, k, {}};
    const size_t distance = size_t{1} << k;
    for (size_t i = distance; i < p; i += 2 * distance)
      step.ops.push_back({ir::OpKind::Broadcast, 0, 1, order[i - distance], {order[i - distance], order[i]}});
    schedule.steps.push_back(std::move(step));
  }
  return schedule;
}

}  // namespace flexplan
