// Recursive doubling over all learners in depth-first order (recursive_doubling.hpp), so that
// the first rounds pair learners of one machine and only the last ones cross the slow links.
#include "planner/recursive_doubling.hpp"

#include "planner/algorithms.hpp"

namespace flexplan {
namespace {

// root takes the sum of its own and `from`'s range.
ir::Op take(int32_t root, int32_t from, uint64_t units) {
  return ir::Op{ir::OpKind::Reduce, 0, units, root, {root, from}};
}

void append_rounds(const int32_t* ranks, size_t count, uint64_t units,
                   std::vector<std::vector<ir::Op>>& rounds, size_t first_round) {
  if (count < 2) return;
  size_t main = 1;
  int m = 0;
  while (main * 2 <= count) {
    main *= 2;
    ++m;
  }
  if (rounds.size() < first_round + static_cast<size_t>(m) + (main < count ? 1 : 0))
    rounds.resize(first_round + static_cast<size_t>(m) + (main < count ? 1 : 0));
  for (int k = 0; k < m; ++k) {
    const size_t distance = size_t{1} << k;
    for (size_t i = 0; i < main; ++i) rounds[first_round + k].push_back(take(ranks[i], ranks[i ^ distance], units));
  }
  const size_t extra = count - main;
  if (extra == 0) return;
  append_rounds(ranks + main, extra, units, rounds, first_round);  // in the same m rounds
  auto& last = rounds[first_round + static_cast<size_t>(m)];
  for (size_t i = 0; i < main; ++i) last.push_back(take(ranks[i], ranks[main + i % extra], units));
  for (size_t j = 0; j < extra; ++j) last.push_back(take(ranks[main + j], ranks[j], units));
}

}  // namespace

int ceil_log2(uint64_t n) {
  int k = 0;
  while ((uint64_t{1} << k) < n) ++k;
  return k;
}

void append_recursive_doubling(const std::vector<int32_t>& ranks, uint64_t units,
                               std::vector<std::vector<ir::Op>>& rounds) {
  append_rounds(ranks.data(), ranks.size(), units, rounds, 0);
}

ir::Schedule plan_recursive_doubling(const Topology& topo) {
  ir::Schedule schedule;
  schedule.algorithm = "recursive-doubling";
  schedule.collective = ir::Collective::AllReduce;
  schedule.units = 1;
  const auto order = topo.learners_under(topo.root());
  std::vector<std::vector<ir::Op>> rounds;
  append_recursive_doubling({order.begin(), order.end()}, 1, rounds);
  for (size_t k = 0; k < rounds.size(); ++k)
    schedule.steps.push_back({ir::Phase::Reduce, static_cast<int32_t>(k), std::move(rounds[k])});
  return schedule;
}

}  // namespace flexplan
