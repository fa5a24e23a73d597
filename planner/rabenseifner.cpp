// Rabenseifner's all-reduce: a reduce-scatter by recursive halving of the vector (distance
// doubling: the first, largest exchange between neighbours in depth-first order), then the
// all-gather by recursive doubling, undoing it. With 2^m + r learners, the first 2r pair up
// (neighbours again) and the even one of each pair first hands its vector to the odd one, which
// stands for both; the odd one hands the result back at the end (MPICH's fold).
#include <vector>

#include "planner/algorithms.hpp"

namespace flexplan {

ir::Schedule plan_rabenseifner(const Topology& topo) {
  ir::Schedule schedule;
  schedule.algorithm = "rabenseifner";
  schedule.collective = ir::Collective::AllReduce;
  const auto order = topo.learners_under(topo.root());
  const size_t p = order.size();
  size_t main = 1;
  int m = 0;
  while (main * 2 <= p) {
    main *= 2;
    ++m;
  }
  const size_t extra = p - main;
  schedule.units = main;
  const uint64_t units = schedule.units;
  if (p < 2) return schedule;
  // The participants: of the first 2r learners the odd ones, then the rest.
  std::vector<int32_t> who;
  for (size_t i = 0; i < p; ++i)
    if (i >= 2 * extra || i % 2 == 1) who.push_back(order[i]);
  if (extra > 0) {
    ir::Step fold{ir::Phase::Reduce, 0, {}};
    for (size_t j = 0; j < extra; ++j)
      fold.ops.push_back({ir::OpKind::Reduce, 0, units, order[2 * j + 1], {order[2 * j + 1], order[2 * j]}});
    schedule.steps.push_back(std::move(fold));
  }
  // range[i]: the units participant i is responsible for; halved each round.
  struct Range {
    uint64_t begin, end;
  };
  std::vector<std::vector<Range>> history(static_cast<size_t>(m) + 1, std::vector<Range>(main));
  for (size_t i = 0; i < main; ++i) history[0][i] = {0, units};
  for (int k = 0; k < m; ++k) {
    ir::Step step{ir::Phase::ReduceScatter, k, {}};
    const size_t distance = size_t{1} << k;
    for (size_t i = 0; i < main; ++i) {
      const Range r = history[static_cast<size_t>(k)][i];
      const uint64_t mid = r.begin + (r.end - r.begin) / 2;
      const bool low = (i & distance) == 0;  // the lower of the pair keeps the lower half
      const Range keep = low ? Range{r.begin, mid} : Range{mid, r.end};
      history[static_cast<size_t>(k) + 1][i] = keep;
      step.ops.push_back({ir::OpKind::Reduce, keep.begin, keep.end, who[i], {who[i], who[i ^ distance]}});
    }
    schedule.steps.push_back(std::move(step));
  }
  for (int k = m; k-- > 0;) {
    ir::Step step{ir::Phase::AllGather, k, {}};
    const size_t distance = size_t{1} << k;
    for (size_t i = 0; i < main; ++i) {
      const Range mine = history[static_cast<size_t>(k) + 1][i];
      step.ops.push_back({ir::OpKind::Broadcast, mine.begin, mine.end, who[i], {who[i], who[i ^ distance]}});
    }
    schedule.steps.push_back(std::move(step));
  }
  if (extra > 0) {
    ir::Step unfold{ir::Phase::Broadcast, 0, {}};
    for (size_t j = 0; j < extra; ++j)
      unfold.ops.push_back({ir::OpKind::Broadcast, 0, units, order[2 * j + 1], {order[2 * j + 1], order[2 * j]}});
    schedule.steps.push_back(std::move(unfold));
  }
  return schedule;
}

}  // namespace flexplan
