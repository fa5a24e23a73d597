// Bandwidth-aware FlexReduce (flexreduce_bw.hpp): the endpoint masses by bisection over
// interval feasibility, the centroid pairing, the tree walks, and the schedule.
#include "planner/flexreduce_bw.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "planner/algorithms.hpp"
#include "planner/floor.hpp"

namespace flexplan {
namespace {

struct Interval {
  double lo = 0, hi = 0;
};

// Every node's feasible endpoint mass below it when every link e must see c_e >= 2 - T w_e;
// false when no masses meet that. Children come before parents in `bottom_up`.
bool feasible(const Topology& topo, const std::vector<NodeId>& bottom_up, double time_per_byte,
              std::vector<Interval>& mass) {
  constexpr double kSlack = 1e-12;
  for (NodeId n : bottom_up) {
    Interval range;
    if (topo.is_learner(n)) {
      range = {0, 1};
    } else {
      for (NodeId child : topo.children(n)) {
        range.lo += mass[child].lo;
        range.hi += mass[child].hi;
      }
    }
    if (separates_learners(topo, n)) {
      const double demand = 2 - time_per_byte * topo.uplink(n).bandwidth;  // least c_e
      if (demand > 1 + kSlack) return false;  // even c_e = 1 leaves too much on this link
      if (demand > 0) {
        range.lo = std::max(range.lo, demand);
        range.hi = std::min(range.hi, 2 - demand);
      }
    }
    if (range.lo > range.hi + kSlack) return false;
    mass[n] = range;
  }
  const Interval& root = mass[topo.root()];
  return root.lo <= 2 + kSlack && root.hi >= 2 - kSlack;
}

std::vector<NodeId> bottom_up_order(const Topology& topo) {
  std::vector<NodeId> order;
  order.reserve(topo.num_nodes());
  for (int rank = 0; rank < topo.num_learners(); ++rank) order.push_back(topo.learner_node(rank));
  for (int level = 0; level < topo.num_levels(); ++level)
    for (NodeId n : topo.nodes_at_level(level)) order.push_back(n);
  return order;
}

}  // namespace

BandwidthShares bandwidth_shares(const Topology& topo) {
  BandwidthShares shares;
  const int learners = topo.num_learners();
  shares.endpoint_mass.assign(learners, 0);
  if (learners < 2) return shares;

  const auto bottom_up = bottom_up_order(topo);
  double slowest = 0;  // seconds per byte of the slowest separating link
  for (NodeId n = 0; n < topo.num_nodes(); ++n)
    if (separates_learners(topo, n)) slowest = std::max(slowest, 1 / topo.uplink(n).bandwidth);
  std::vector<Interval> mass(topo.num_nodes());
  // T = 2 / w_min leaves every demand <= 0: always feasible. The floor is never beaten.
  double hi = 2 * slowest, lo = cost_floor(topo).per_byte;
  if (!feasible(topo, bottom_up, hi, mass))
    throw std::logic_error("flexreduce-bw: no endpoint masses at twice the slowest link");
  for (int i = 0; i < 100 && hi - lo > hi * 1e-12; ++i) {
    const double mid = 0.5 * (lo + hi);
    (feasible(topo, bottom_up, mid, mass) ? hi : lo) = mid;
  }
  feasible(topo, bottom_up, hi, mass);
  shares.per_byte = hi;

  // Top down: the root holds all 2; each node splits its mass among its children at the same
  // fraction of the way from their lows to their highs.
  std::vector<double> assigned(topo.num_nodes(), 0);
  assigned[topo.root()] = 2;
  for (auto it = bottom_up.rbegin(); it != bottom_up.rend(); ++it) {
    const NodeId n = *it;
    if (topo.is_learner(n)) {
      shares.endpoint_mass[topo.rank_of(n)] = std::clamp(assigned[n], 0.0, 1.0);
      continue;
    }
    double lo_sum = 0, hi_sum = 0;
    for (NodeId child : topo.children(n)) {
      lo_sum += mass[child].lo;
      hi_sum += mass[child].hi;
    }
    const double t = hi_sum > lo_sum ? std::clamp((assigned[n] - lo_sum) / (hi_sum - lo_sum), 0.0, 1.0) : 0;
    for (NodeId child : topo.children(n))
      assigned[child] = mass[child].lo + t * (mass[child].hi - mass[child].lo);
  }

  // The centroid: walk down while a child holds more than half the mass (at most one can).
  NodeId centroid = topo.root();
  for (bool moved = true; moved;) {
    moved = false;
    for (NodeId child : topo.children(centroid)) {
      if (!topo.is_learner(child) && assigned[child] > 1 + 1e-9) {
        centroid = child;
        moved = true;
        break;
      }
    }
  }
  shares.centroid = centroid;
  return shares;
}

std::vector<int32_t> tree_walk(const Topology& topo, int32_t first, int32_t last) {
  const int learners = topo.num_learners();
  std::vector<int32_t> walk;
  walk.reserve(learners);
  const auto append_under = [&](NodeId n) {
    const auto ranks = topo.learners_under(n);
    walk.insert(walk.end(), ranks.begin(), ranks.end());
  };
  const auto append_children_except = [&](NodeId n, NodeId skip_a, NodeId skip_b) {
    for (NodeId child : topo.children(n))
      if (child != skip_a && child != skip_b) append_under(child);
  };
  const NodeId lca = topo.lca(first, last);
  walk.push_back(first);
  // Up from `first`: at each ancestor below the LCA, the other subtrees.
  NodeId from_first = topo.learner_node(first);
  while (topo.parent(from_first) != lca) {
    append_children_except(topo.parent(from_first), from_first, -1);
    from_first = topo.parent(from_first);
  }
  // The path from the LCA down to `last`, top first.
  std::vector<NodeId> down;
  for (NodeId n = topo.learner_node(last); n != lca; n = topo.parent(n)) down.push_back(n);
  std::reverse(down.begin(), down.end());
  // At the LCA: its other children, and the rest of the tree above it in cyclic depth-first
  // order from just after the LCA's block, so that the walk leaves and re-enters it once.
  append_children_except(lca, from_first, down.front());
  if (lca != topo.root()) {
    const auto all = topo.learners_under(topo.root());
    const auto block = topo.learners_under(lca);
    const size_t begin = static_cast<size_t>(block.data() - all.data());
    const size_t end = begin + block.size();
    walk.insert(walk.end(), all.begin() + static_cast<std::ptrdiff_t>(end), all.end());
    walk.insert(walk.end(), all.begin(), all.begin() + static_cast<std::ptrdiff_t>(begin));
  }
  // Down to `last`: at each node of the path, the subtrees off the path.
  for (size_t i = 0; i + 1 < down.size(); ++i) append_children_except(down[i], down[i + 1], -1);
  walk.push_back(last);
  if (walk.size() != static_cast<size_t>(learners))
    throw std::logic_error("tree_walk: the walk does not visit every learner once");
  return walk;
}

namespace {

constexpr uint64_t kHalfCircle = uint64_t{1} << 32;  // the vector is 2 * kHalfCircle units

}  // namespace

ir::Schedule plan_flexreduce_bw(const Topology& topo) {
  ir::Schedule schedule;
  schedule.algorithm = "flexreduce-bw";
  schedule.collective = ir::Collective::AllReduce;
  schedule.units = 2 * kHalfCircle;
  const int learners = topo.num_learners();
  if (learners < 2) return schedule;
  const auto shares = bandwidth_shares(topo);

  // The circle: the centroid's learners, then the rest in cyclic depth-first order, each with
  // an arc of its mass; every branch around the centroid is one arc of at most half the circle.
  const auto all = topo.learners_under(topo.root());
  const auto block = topo.learners_under(shares.centroid);
  const size_t begin = static_cast<size_t>(block.data() - all.data());
  std::vector<int32_t> circle;
  circle.reserve(learners);
  for (size_t i = 0; i < all.size(); ++i) circle.push_back(all[(begin + i) % all.size()]);
  std::vector<uint64_t> arc_start(learners + 1);  // arc of circle[i] is [arc_start[i], arc_start[i+1])
  double cumulative = 0;
  for (int i = 0; i < learners; ++i) {
    arc_start[i] = std::min<uint64_t>(static_cast<uint64_t>(std::llround(cumulative * kHalfCircle)),
                                      schedule.units);
    cumulative += shares.endpoint_mass[circle[i]];
  }
  arc_start[learners] = schedule.units;
  for (int i = learners - 1; i >= 0; --i) arc_start[i] = std::min(arc_start[i], arc_start[i + 1]);

  // Item x is owned by the learner whose arc holds x and starts at the one whose arc holds
  // x + half the circle.
  std::vector<uint64_t> cuts;
  for (int i = 0; i < learners; ++i) {
    cuts.push_back(arc_start[i]);
    cuts.push_back((arc_start[i] + kHalfCircle) % schedule.units);
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  const auto holder = [&](uint64_t x) {
    const auto it = std::upper_bound(arc_start.begin(), arc_start.end(), x);
    return static_cast<size_t>(it - arc_start.begin()) - 1;  // index into circle
  };

  ir::Step reduce{ir::Phase::ReduceScatter, topo.num_levels() - 1, {}};
  ir::Step broadcast{ir::Phase::AllGather, topo.num_levels() - 1, {}};
  for (size_t c = 0; c < cuts.size(); ++c) {
    const uint64_t from = cuts[c];
    const uint64_t to = c + 1 < cuts.size() ? cuts[c + 1] : schedule.units;
    if (from >= to) continue;
    const size_t owner_at = holder(from);
    size_t first_at = holder((from + kHalfCircle) % schedule.units);
    if (first_at == owner_at) first_at = (owner_at + 1) % circle.size();  // rounding guard
    const int32_t owner = circle[owner_at];
    const auto walk = tree_walk(topo, circle[first_at], owner);
    ir::Op op;
    op.kind = ir::OpKind::Reduce;
    op.begin = from;
    op.end = to;
    op.root = owner;
    // The chain runs cyclically after the root: root first, then the walk from `first`.
    op.group.reserve(walk.size());
    op.group.push_back(owner);
    op.group.insert(op.group.end(), walk.begin(), walk.end() - 1);
    reduce.ops.push_back(op);
    // The all-gather walks back: root, then the walk reversed, ending at `first`.
    op.kind = ir::OpKind::Broadcast;
    std::reverse(op.group.begin() + 1, op.group.end());
    broadcast.ops.push_back(std::move(op));
  }
  schedule.steps.push_back(std::move(reduce));
  schedule.steps.push_back(std::move(broadcast));
  return schedule;
}

}  // namespace flexplan
