// All-reduce schedules for small and mid-size messages, where the diameter latency and the
// per-hop software cost dominate (docs/planner.md, "Latency trees"):
//   - direct: one step in which every learner is the root of a star reduce over all learners,
//     so the sum crosses each path once (the diameter, plus the roots' per-hop costs);
//   - leader-direct: a star reduce to one leader per machine, direct among the leaders, a star
//     broadcast back (learners on a switch that also has machines below lead themselves);
//   - centre-tree: the machines' leaders in a binary tree rooted at the leader nearest the
//     tree's centre (least eccentricity in links), nearer leaders higher; reduce up, broadcast down. Its
//     pipelined variants (centre-tree@S) overlap the reduce of one slice with the broadcast of
//     the slice before;
//   - double-tree: two such trees, each on half the units, the second built so that the first
//     one's leaves are its inner nodes: every leader's link carries data both ways.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include <fmt/core.h>

#include "planner/algorithms.hpp"
#include "planner/latency_trees.hpp"
#include "planner/machines.hpp"

namespace flexplan {
namespace {

// Links between two ranks. The shapes below depend on the tree's structure only, not on its
// link values, so that whatif's in-place sweeps (which edit link values and keep schedules)
// price the schedule a fresh plan would build.
double links_between(const Topology& topo, int32_t a, int32_t b) {
  const NodeId x = topo.learner_node(a), y = topo.learner_node(b), top = topo.lca(a, b);
  return topo.depth(x) + topo.depth(y) - 2 * topo.depth(top);
}

ir::Schedule start(const char* name, uint64_t units) {
  ir::Schedule schedule;
  schedule.algorithm = name;
  schedule.collective = ir::Collective::AllReduce;
  schedule.units = units;
  return schedule;
}

// A star op with its members farthest from the root first: the order in which a root that takes
// arrivals as they come handles them, and the one the model queues them in (docs/cost-model.md).
ir::Op star(const Topology& topo, ir::OpKind kind, uint64_t begin, uint64_t end, int32_t root,
            std::vector<int32_t> group) {
  std::vector<std::pair<double, int32_t>> keyed;
  for (int32_t r : group) keyed.emplace_back(r == root ? 1e300 : links_between(topo, r, root), r);
  std::stable_sort(keyed.begin(), keyed.end(),
                   [](const auto& x, const auto& y) { return x.first > y.first; });
  for (size_t i = 0; i < group.size(); ++i) group[i] = keyed[i].second;
  ir::Op op{kind, begin, end, root, ir::RankList(std::move(group))};
  op.shape = ir::OpShape::Star;
  return op;
}

// Every learner the root of a star reduce over all of them, on [0, units).
void append_direct(const Topology& topo, const std::vector<int32_t>& ranks, uint64_t units, ir::Step& step) {
  for (int32_t root : ranks) step.ops.push_back(star(topo, ir::OpKind::Reduce, 0, units, root, ranks));
}

// Machines' star reduces and broadcasts around `middle`, the steps among the leaders.
ir::Schedule around_machines(const Topology& topo, ir::Schedule schedule, const std::vector<Machine>& machines,
                             std::vector<ir::Step> middle) {
  ir::Step reduce{ir::Phase::Reduce, 0, {}}, broadcast{ir::Phase::Broadcast, 0, {}};
  for (const Machine& machine : machines) {
    if (machine.learners.size() < 2) continue;
    reduce.ops.push_back(star(topo, ir::OpKind::Reduce, 0, schedule.units, machine.leader, machine.learners));
    broadcast.ops.push_back(star(topo, ir::OpKind::Broadcast, 0, schedule.units, machine.leader, machine.learners));
  }
  if (!reduce.ops.empty()) schedule.steps.push_back(std::move(reduce));
  for (auto& step : middle)
    if (!step.ops.empty()) schedule.steps.push_back(std::move(step));
  if (!broadcast.ops.empty()) schedule.steps.push_back(std::move(broadcast));
  return schedule;
}

// Machines for the latency rows: learners attached straight to a switch that also has machines
// below it reach each other through that switch's links, as far as any other learner; they are
// machines of one each, not a group whose star would add a network round trip.
std::vector<Machine> latency_machines_of(const Topology& topo) {
  std::vector<Machine> out;
  for (Machine& machine : machines_of(topo)) {
    const NodeId parent = topo.parent(topo.learner_node(machine.leader));
    if (machine.learners.size() < 2 || topo.is_machine(parent)) {
      out.push_back(std::move(machine));
      continue;
    }
    for (int32_t rank : machine.learners) out.push_back(Machine{{rank}, rank});
  }
  return out;
}

std::vector<int32_t> leaders_of(const std::vector<Machine>& machines) {
  std::vector<int32_t> leaders;
  for (const Machine& machine : machines) leaders.push_back(machine.leader);
  return leaders;
}

// A heap of fan-out 2 over `order` (order[0] the root, the parent of i at (i - 1) / 2): its
// reduce steps, deepest level first, each parent a star root over its children and itself;
// added to `reduce` (by depth, from the bottom) and `broadcast` (from the top) on [begin, end).
void append_heap(const Topology& topo, const std::vector<int32_t>& order, uint64_t begin, uint64_t end,
                 std::vector<ir::Step>& reduce, std::vector<ir::Step>& broadcast) {
  const size_t m = order.size();
  if (m < 2) return;
  size_t depth = 0;
  while ((size_t{2} << depth) - 1 < m) ++depth;  // levels below the root
  if (reduce.size() < depth) reduce.resize(depth, ir::Step{ir::Phase::Reduce, 1, {}});
  if (broadcast.size() < depth) broadcast.resize(depth, ir::Step{ir::Phase::Broadcast, 1, {}});
  // Level d (1..depth) holds heap indices [2^d - 1, 2^(d+1) - 1).
  for (size_t d = 1; d <= depth; ++d) {
    const size_t first = (size_t{1} << d) - 1, last = std::min(m, (size_t{2} << d) - 1);
    for (size_t parent = (first - 1) / 2; parent <= (last - 2) / 2; ++parent) {
      std::vector<int32_t> group;
      for (size_t child = 2 * parent + 1; child <= 2 * parent + 2 && child < m; ++child)
        group.push_back(order[child]);
      if (group.empty()) continue;
      group.push_back(order[parent]);
      reduce[depth - d].ops.push_back(star(topo, ir::OpKind::Reduce, begin, end, order[parent], group));
      broadcast[d - 1].ops.push_back(star(topo, ir::OpKind::Broadcast, begin, end, order[parent], group));
    }
  }
}

}  // namespace

std::vector<int32_t> by_distance_from_centre(const Topology& topo, const std::vector<int32_t>& ranks) {
  if (ranks.size() < 3) return ranks;
  // On a tree the farthest rank from any rank is an end of a longest path, so two sweeps find
  // both ends and every rank's eccentricity is its larger distance to them.
  const auto farthest = [&](int32_t from) {
    int32_t best = ranks.front();
    double far = -1;
    for (int32_t r : ranks)
      if (const double d = links_between(topo, from, r); d > far) far = d, best = r;
    return best;
  };
  const int32_t a = farthest(ranks.front()), b = farthest(a);
  int32_t centre = ranks.front();
  double least = -1;
  for (int32_t r : ranks) {
    const double e = std::max(links_between(topo, r, a), links_between(topo, r, b));
    if (least < 0 || e < least) least = e, centre = r;
  }
  std::vector<std::pair<double, int32_t>> keyed;
  for (int32_t r : ranks) keyed.emplace_back(r == centre ? -1.0 : links_between(topo, centre, r), r);
  std::stable_sort(keyed.begin(), keyed.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<int32_t> order;
  for (const auto& entry : keyed) order.push_back(entry.second);
  return order;
}

ir::Schedule plan_direct(const Topology& topo) {
  auto schedule = start("direct", 1);
  ir::Step step{ir::Phase::Reduce, 0, {}};
  const auto all = topo.learners_under(topo.root());
  append_direct(topo, std::vector<int32_t>(all.begin(), all.end()), 1, step);
  if (step.ops.size() > 1) schedule.steps.push_back(std::move(step));
  return schedule;
}

ir::Schedule plan_leader_direct(const Topology& topo) {
  const auto machines = latency_machines_of(topo);
  std::vector<ir::Step> middle(1, ir::Step{ir::Phase::Reduce, 1, {}});
  const auto leaders = leaders_of(machines);
  if (leaders.size() > 1) append_direct(topo, leaders, 1, middle[0]);
  return around_machines(topo, start("leader-direct", 1), machines, std::move(middle));
}

ir::Schedule plan_centre_tree(const Topology& topo) {
  const auto machines = machines_of(topo);
  std::vector<ir::Step> reduce, broadcast;
  append_heap(topo, by_distance_from_centre(topo, leaders_of(machines)), 0, 1, reduce, broadcast);
  reduce.insert(reduce.end(), broadcast.begin(), broadcast.end());
  return around_machines(topo, start("centre-tree", 1), machines, std::move(reduce));
}

ir::Schedule plan_double_tree(const Topology& topo) {
  const auto machines = machines_of(topo);
  const auto first = by_distance_from_centre(topo, leaders_of(machines));
  // The first heap's inner nodes are its first floor(m / 2) entries; the second heap puts its
  // leaves (nearest the centre first) on top, so that each leader is inner in at most one.
  const size_t inner = first.size() / 2;
  std::vector<int32_t> second(first.begin() + static_cast<std::ptrdiff_t>(inner), first.end());
  second.insert(second.end(), first.begin(), first.begin() + static_cast<std::ptrdiff_t>(inner));
  std::vector<ir::Step> reduce, broadcast;
  append_heap(topo, first, 0, 1, reduce, broadcast);
  std::vector<ir::Step> reduce2, broadcast2;
  append_heap(topo, second, 1, 2, reduce2, broadcast2);
  // Both heaps have the same depth (the same number of leaders): level by level together.
  for (size_t d = 0; d < reduce2.size(); ++d) {
    for (auto& op : reduce2[d].ops) reduce[d].ops.push_back(std::move(op));
    for (auto& op : broadcast2[d].ops) broadcast[d].ops.push_back(std::move(op));
  }
  reduce.insert(reduce.end(), broadcast.begin(), broadcast.end());
  return around_machines(topo, start("double-tree", 2), machines, std::move(reduce));
}

ScheduleSize latency_tree_size(const Topology& topo, bool direct_among_leaders, uint64_t trees) {
  const auto machines = direct_among_leaders ? latency_machines_of(topo) : machines_of(topo);
  ScheduleSize size;
  for (const Machine& machine : machines) {
    if (machine.learners.size() < 2) continue;
    size.ops += 2;
    size.group_members += 2 * machine.learners.size();
  }
  const uint64_t m = machines.size();
  if (direct_among_leaders) {
    size.ops += m;
    size.group_members += m * m;
  } else {
    size.ops += 2 * trees * m;
    size.group_members += 6 * trees * m;
  }
  return size;
}

std::string direct_unsuitable(const Topology& topo) {
  if (topo.num_learners() <= kMaxDirectRanks) return {};
  return fmt::format("{} learners: each root's {} hops, one after another, cost more than a tree (at most {})",
                     topo.num_learners(), topo.num_learners() - 1, kMaxDirectRanks);
}

std::string leader_direct_unsuitable(const Topology& topo) {
  const size_t machines = latency_machines_of(topo).size();
  if (machines <= kMaxDirectRanks) return {};
  return fmt::format("{} machines: each leader's {} hops, one after another, cost more than a tree (at most {})",
                     machines, machines - 1, kMaxDirectRanks);
}

ScheduleSize direct_size(const Topology& topo) {
  const uint64_t p = topo.num_learners();
  const unsigned __int128 members = static_cast<unsigned __int128>(p) * p;
  return {p, members > ~uint64_t{0} ? ~uint64_t{0} : static_cast<uint64_t>(members)};
}

}  // namespace flexplan
