// Bandwidth-aware FlexReduce: the schedule from the LP's shares (bandwidth_shares.hpp).
//
// Each virtual tree of the mix serves its own slice of the vector. Within a slice the ranges are
// laid out top down: at every active node u, the items its subtree holds after each step form
// nested sets (what it keeps at the root inside what it keeps one level lower, and so on out to
// the whole slice after u's own step); the rings between consecutive sets are cut among u's
// virtual children by their shares, so that every child's sets are nested too. Then, level by
// level from the bottom, every branch's items become star reduces: root = the learner that owns
// the item after the branch's step, group = the item's holder in every child (the owner among
// them). The all-gather mirrors the reduce-scatter with star broadcasts.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>
#include <vector>

#include "planner/algorithms.hpp"
#include "planner/bandwidth_shares.hpp"
#include "planner/cost_model.hpp"
#include "topology/topology.hpp"
#include "planner/virtual_tree.hpp"

namespace flexplan {
namespace {

// Disjoint, sorted unit ranges.
struct Interval {
  uint64_t begin = 0, end = 0;
};
using Intervals = std::vector<Interval>;

// a minus b, where b lies within a.
Intervals difference(const Intervals& a, const Intervals& b) {
  Intervals out;
  size_t j = 0;
  for (Interval piece : a) {
    while (j < b.size() && b[j].end <= piece.begin) ++j;
    uint64_t at = piece.begin;
    for (size_t k = j; k < b.size() && b[k].begin < piece.end; ++k) {
      if (b[k].begin > at) out.push_back({at, b[k].begin});
      at = std::max(at, b[k].end);
    }
    if (at < piece.end) out.push_back({at, piece.end});
  }
  return out;
}

uint64_t size_of(const Intervals& set) {
  uint64_t size = 0;
  for (const Interval& piece : set) size += piece.end - piece.begin;
  return size;
}

Intervals merged(Intervals set) {
  std::sort(set.begin(), set.end(), [](auto& x, auto& y) { return x.begin < y.begin; });
  Intervals out;
  for (const Interval& piece : set) {
    if (piece.begin == piece.end) continue;
    if (!out.empty() && out.back().end == piece.begin)
      out.back().end = piece.end;
    else
      out.push_back(piece);
  }
  return out;
}

// Cuts `ring` in order into consecutive parts with sizes in proportion to `weights`, rounding
// the cumulative sizes so that the parts cover it exactly.
std::vector<Intervals> cut(const Intervals& ring, const std::vector<double>& weights) {
  std::vector<Intervals> parts(weights.size());
  const uint64_t total = size_of(ring);
  double sum = 0;
  for (double w : weights) sum += w;
  size_t piece = 0;
  uint64_t offset = 0;  // into ring[piece]
  uint64_t taken = 0;
  double cumulative = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    cumulative += weights[i];
    const uint64_t goal =
        i + 1 == weights.size() || sum <= 0
            ? (i + 1 == weights.size() ? total : 0)
            : std::min<uint64_t>(total, static_cast<uint64_t>(std::llround(cumulative / sum * static_cast<double>(total))));
    while (taken < goal) {
      const Interval& r = ring[piece];
      const uint64_t available = r.end - r.begin - offset;
      const uint64_t take = std::min(available, goal - taken);
      parts[i].push_back({r.begin + offset, r.begin + offset + take});
      taken += take;
      offset += take;
      if (offset == r.end - r.begin) {
        ++piece;
        offset = 0;
      }
    }
  }
  return parts;
}

// One virtual tree's slice [begin, end) of the vector, laid out and turned into ops.
class SliceLayout {
 public:
  SliceLayout(const Topology& topo, const VirtualTree& vt, const ShareClass& share,
              Interval slice)
      : topo_(topo), vt_(vt), share_(share), slice_(slice), held_(topo.num_nodes()) {
    lay_out();
  }

  // Appends the reduce ops of every branch to rs[level], mirrored broadcasts to ag[level],
  // counting them into `size`; throws ScheduleBeyondLimits once that passes the limits.
  void emit(std::vector<ir::Step>& rs, std::vector<ir::Step>& ag, ScheduleSize& size) const {
    for (NodeId a : vt_.bottom_up()) {
      if (vt_.children(a).size() < 2) continue;
      const int level = vt_.level(a);
      for (ir::Op op : branch_ops(a, size)) {
        rs[level].ops.push_back(op);
        op.kind = ir::OpKind::Broadcast;
        ag[level].ops.push_back(std::move(op));
      }
    }
  }

 private:
  // held_[u][j]: what u's subtree holds after the step of its j-th virtual ancestor.
  void lay_out() {
    const Intervals whole{slice_};
    const auto& order = vt_.bottom_up();
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const NodeId u = *it;
      const auto& kids = vt_.children(u);
      if (kids.empty()) continue;
      const size_t m = vt_.ancestors(u).size();
      // Rings from the innermost (kept at the root) out to the whole slice (u's own step).
      std::vector<Intervals> rings;
      if (m > 0) {
        rings.push_back(held_[u][m - 1]);
        for (size_t i = 1; i < m; ++i)
          rings.push_back(difference(held_[u][m - 1 - i], held_[u][m - i]));
        rings.push_back(difference(whole, held_[u][0]));
      } else {
        rings.push_back(whole);
      }
      std::vector<Intervals> kept(kids.size());
      for (const NodeId c : kids) held_[c].assign(m + 1, {});
      for (size_t i = 0; i <= m; ++i) {
        // Ring i is kept by child c at its ancestor index m - i.
        std::vector<double> weights(kids.size());
        for (size_t k = 0; k < kids.size(); ++k) {
          const auto& fractions = share_.held[kids[k]];
          const double inner = i == 0 ? 0.0 : fractions[m - i + 1];
          weights[k] = std::max(0.0, fractions[m - i] - inner);
        }
        const auto parts = cut(rings[i], weights);
        for (size_t k = 0; k < kids.size(); ++k) {
          kept[k].insert(kept[k].end(), parts[k].begin(), parts[k].end());
          kept[k] = merged(std::move(kept[k]));
          held_[kids[k]][m - i] = kept[k];
        }
      }
    }
  }

  struct Owned {
    uint64_t begin, end;
    int32_t rank;
  };

  // Who holds what under `node` after the step of `after` (an ancestor of node's learners), by
  // position; a learner on its own holds the whole slice.
  std::vector<Owned> holdings(NodeId node, NodeId after) const {
    std::vector<Owned> out;
    if (topo_.is_learner(node)) {
      out.push_back({slice_.begin, slice_.end, topo_.rank_of(node)});
      return out;
    }
    for (int rank : vt_.learners_under(node)) {
      const NodeId l = topo_.learner_node(rank);
      const auto& ancestors = vt_.ancestors(l);
      const size_t j = static_cast<size_t>(
          std::find(ancestors.begin(), ancestors.end(), after) - ancestors.begin());
      for (const Interval& piece : held_[l][j]) out.push_back({piece.begin, piece.end, rank});
    }
    std::sort(out.begin(), out.end(), [](auto& x, auto& y) { return x.begin < y.begin; });
    return out;
  }

  std::vector<ir::Op> branch_ops(NodeId a, ScheduleSize& size) const {
    const auto& kids = vt_.children(a);
    const auto owners = holdings(a, a);
    // Every owner's piece is an op of its own (adjacent pieces have different owners, each
    // learner's being merged), each with one member per child: where that alone passes the
    // limits, stop before building any of them.
    const ScheduleSize at_least{size.ops + 2 * owners.size(), size.group_members + 2 * owners.size() * kids.size()};
    if (!schedule_fits_limits(at_least)) throw ScheduleBeyondLimits("flexreduce-bw", at_least);
    std::vector<std::vector<Owned>> holders;
    for (NodeId c : kids) holders.push_back(holdings(c, c));
    std::vector<ir::Op> ops;
    std::vector<size_t> at(kids.size(), 0);
    size_t owner_at = 0;
    uint64_t pos = slice_.begin;
    while (pos < slice_.end) {
      while (owners[owner_at].end <= pos) ++owner_at;
      uint64_t end = owners[owner_at].end;
      ir::Op op;
      op.kind = ir::OpKind::Reduce;
      op.shape = ir::OpShape::Star;
      op.root = owners[owner_at].rank;
      for (size_t k = 0; k < kids.size(); ++k) {
        while (holders[k][at[k]].end <= pos) ++at[k];
        end = std::min(end, holders[k][at[k]].end);
        op.group.push_back(holders[k][at[k]].rank);
      }
      op.begin = pos;
      op.end = end;
      pos = end;
      if (!ops.empty() && ops.back().end == op.begin && ops.back().root == op.root &&
          ops.back().group == op.group) {
        ops.back().end = op.end;
        continue;
      }
      // A reduce here and its mirrored broadcast: stop before a flat tree's P ops of P members
      // each fill the memory.
      size.ops += 2;
      size.group_members += 2 * op.group.size();
      if (!schedule_fits_limits(size)) throw ScheduleBeyondLimits("flexreduce-bw", size);
      ops.push_back(std::move(op));
    }
    return ops;
  }

  const Topology& topo_;
  const VirtualTree& vt_;
  const ShareClass& share_;
  Interval slice_;
  std::vector<std::vector<Intervals>> held_;
};

constexpr uint64_t kUnits = uint64_t{1} << 40;

// A lower bound of the schedule's ops and group members: a learner that holds some of its
// class's slice after the step of a virtual ancestor with k >= 2 children owns items there, so
// it is the root of at least one reduce of k members at that step, and of its mirrored
// broadcast. A holding counts only when it is large enough to keep a unit through the layout's
// rounding (each ring's part is rounded once, at most one unit off per ring).
ScheduleSize at_least(const Topology& topo, const std::vector<VirtualTree>& trees,
                      const BandwidthShares& shares) {
  ScheduleSize size;
  for (size_t c = 0; c < shares.classes.size(); ++c) {
    const VirtualTree& vt = trees[c];
    const auto& held = shares.classes[c].held;
    const double units = shares.classes[c].weight * static_cast<double>(kUnits);
    for (int rank = 0; rank < topo.num_learners(); ++rank) {
      const NodeId l = topo.learner_node(rank);
      if (!vt.active(l)) continue;
      const auto& ancestors = vt.ancestors(l);
      const auto& fractions = held[static_cast<size_t>(l)];
      const double enough = static_cast<double>(ancestors.size() + 2);
      for (size_t j = 0; j < ancestors.size() && j < fractions.size(); ++j) {
        const uint64_t k = vt.children(ancestors[j]).size();
        if (k < 2 || fractions[j] * units < enough) continue;
        size.ops += 2;
        size.group_members += 2 * k;
      }
    }
  }
  return size;
}

// The sum of n's prime factors, with multiplicity: the least sum of integers >= 2 whose product
// is n (for a, b >= 2, a + b <= a b, so splitting a factor never raises the sum).
uint64_t prime_factor_sum(uint64_t n) {
  uint64_t sum = 0;
  for (uint64_t p = 2; p * p <= n; ++p)
    for (; n % p == 0; n /= p) sum += p;
  return n > 1 ? sum + n : sum;
}

}  // namespace

// On a level-uniform tree (below) the LP's columns are one per orbit, and every level is one
// orbit: all learners hold the same shares in every class, 1/P of its slice each after the
// root's step, and at least that after every lower step (holdings only shrink going up). The
// classes are distinct virtual trees of at least two columns each, within twice
// kMaxShareLpColumns, so one of them carries at least 1 / kMaxShareLpColumns of the vector;
// where that leaves every learner more units than at_least asks for, at_least counts, in that
// class, 2 ops and 2k members for every learner and every virtual ancestor of k >= 2 children.
// Transparency comes by whole orbits, here whole levels, so the k along each learner's path
// multiply to P, and add up to at least P's prime factors' sum. So the builder would stop past
// the limits anyway, after the LP (13 LPs over a million nodes on the deep tree of
// bench/planning/million_shapes.py: 4 s of CPU) has run for nothing.
ScheduleSize flexreduce_bw_uniform_bound(const Topology& topo) {
  const int learners = topo.num_learners();
  if (learners < 2) return {};
  // Level-uniform: the nodes of each depth have the same uplink bandwidth and number of
  // children, and the learners are exactly the nodes of the deepest level.
  int deepest = 0;
  for (NodeId n = 0; n < topo.num_nodes(); ++n) deepest = std::max(deepest, topo.depth(n));
  std::vector<int> fan_out(static_cast<size_t>(deepest) + 1, -1);
  std::vector<double> bandwidth(static_cast<size_t>(deepest) + 1, -1);
  for (NodeId n = 0; n < topo.num_nodes(); ++n) {
    const auto d = static_cast<size_t>(topo.depth(n));
    if (topo.is_learner(n) != (topo.depth(n) == deepest)) return {};
    if (fan_out[d] < 0) fan_out[d] = topo.degree(n);
    if (fan_out[d] != topo.degree(n)) return {};
    if (n == topo.root()) continue;
    if (bandwidth[d] < 0) bandwidth[d] = topo.uplink(n).bandwidth;
    if (bandwidth[d] != topo.uplink(n).bandwidth) return {};
  }
  // The learner's units in the class of largest weight, against at_least's "enough".
  const double units = static_cast<double>(kUnits) / static_cast<double>(kMaxShareLpColumns) /
                       static_cast<double>(learners);
  if (units < 2.0 * static_cast<double>(deepest + 2)) return {};  // twice: the LP's tolerance
  const auto p = static_cast<uint64_t>(learners);
  return {2 * p, 2 * p * prime_factor_sum(p)};
}

ir::Schedule plan_flexreduce_bw(const Topology& topo) { return plan_flexreduce_bw(topo, CostParams{}); }

ir::Schedule plan_flexreduce_bw(const Topology& topo, const CostParams& params) {
  ir::Schedule schedule;
  schedule.algorithm = "flexreduce-bw";
  schedule.collective = ir::Collective::AllReduce;
  schedule.units = kUnits;
  if (topo.num_learners() < 2) return schedule;
  if (const ScheduleSize bound = flexreduce_bw_uniform_bound(topo); !schedule_fits_limits(bound))
    throw ScheduleBeyondLimits("flexreduce-bw", bound);
  const auto shares = bandwidth_shares(topo, ShareSolve::column_generation, params.incast_loss);

  std::vector<VirtualTree> trees;
  int levels = 0;
  for (const auto& share : shares.classes) {
    levels = std::max(levels, trees.emplace_back(topo, share.transparent).levels());
  }
  // Before laying anything out (held ranges for every node and ancestor: gigabytes on a deep
  // tree of a million learners), a lower bound of the schedule's size from the shares alone.
  ScheduleSize size = at_least(topo, trees, shares);
  if (!schedule_fits_limits(size)) throw ScheduleBeyondLimits("flexreduce-bw", size);
  size = {};
  std::vector<ir::Step> rs(levels), ag(levels);
  double cumulative = 0;
  uint64_t begin = 0;
  for (size_t c = 0; c < shares.classes.size(); ++c) {
    cumulative += shares.classes[c].weight;
    const uint64_t end =
        c + 1 == shares.classes.size()
            ? kUnits
            : std::min<uint64_t>(kUnits, static_cast<uint64_t>(std::llround(cumulative * static_cast<double>(kUnits))));
    if (end > begin) SliceLayout(topo, trees[c], shares.classes[c], {begin, end}).emit(rs, ag, size);
    begin = end;
  }
  for (int level = 0; level < levels; ++level) {
    if (rs[level].ops.empty()) continue;
    rs[level].phase = ir::Phase::ReduceScatter;
    rs[level].level = level;
    schedule.steps.push_back(std::move(rs[level]));
  }
  for (int level = levels; level-- > 0;) {
    if (ag[level].ops.empty()) continue;
    ag[level].phase = ir::Phase::AllGather;
    ag[level].level = level;
    schedule.steps.push_back(std::move(ag[level]));
  }
  return schedule;
}

}  // namespace flexplan
