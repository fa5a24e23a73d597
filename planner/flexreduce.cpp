// FlexReduce planning, the paper's Fig. 3. Levels are visited bottom-up; at level l every
// branch node x of that level (all of them concurrently, in one IR step) divides the portion of
// each learner under it by its degree, then assign_range: the learners under x, sorted by
// (current range end, current range start, name), take consecutive new ranges of their portion
// from a progress counter. Each new range is split wherever the set of data holders changes (the
// holder for child c is the learner under c whose current range covers the unit), and each piece
// becomes one reduce op: root = the learner taking the range, group = the holders in child
// order. The all-gather replays the steps in reverse as broadcasts.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "planner/algorithms.hpp"
#include "planner/flexreduce.hpp"

namespace flexplan {
namespace {

using u128 = unsigned __int128;
constexpr u128 kU64Max = ~uint64_t{0};

struct Range {
  uint64_t begin = 0;
  uint64_t end = 0;
};

class FlexReducePlanner {
 public:
  explicit FlexReducePlanner(const Topology& topo)
      : topo_(topo), units_(flexreduce_units(topo)), ranges_(topo.num_learners()) {
    const int learners = topo.num_learners();
    for (auto& range : ranges_) range = {0, units_.units};
    if (units_.exact)
      portion_.assign(learners, units_.units);
    else
      portion_f_.assign(learners, static_cast<long double>(units_.units));
    // Ties in (end, start) break by full name; rank the names once instead of comparing strings.
    const std::vector<std::string> names = topo.learner_names();
    std::vector<int> by_name(learners);
    std::iota(by_name.begin(), by_name.end(), 0);
    std::sort(by_name.begin(), by_name.end(), [&](int a, int b) { return names[a] < names[b]; });
    name_order_.resize(learners);
    for (int i = 0; i < learners; ++i) name_order_[by_name[i]] = i;
  }

  ir::Schedule plan() {
    ir::Schedule schedule;
    schedule.algorithm = "flexreduce";
    schedule.collective = ir::Collective::AllReduce;
    schedule.units = units_.units;
    for (int level = 0; level < topo_.num_levels(); ++level) {
      ir::Step step{ir::Phase::ReduceScatter, level, {}};
      for (NodeId x : topo_.nodes_at_level(level)) assign_ranges(x, step.ops);
      if (!step.ops.empty()) schedule.steps.push_back(std::move(step));
    }
    append_mirror_all_gather(schedule.steps.edit());
    return schedule;
  }

 private:
  // The learners under one child of x with their current ranges, by position. They partition
  // [0, units) (a learner child holds everything), so a sweep finds every unit's holder.
  struct Piece {
    uint64_t end;
    int32_t rank;
  };

  void assign_ranges(NodeId x, std::vector<ir::Op>& ops) {
    const auto learners = topo_.learners_under(x);
    const int degree = topo_.degree(x);
    for (int rank : learners) divide_portion(rank, degree);

    std::vector<std::vector<Piece>> holders;
    holders.reserve(degree);
    for (NodeId child : topo_.children(x)) holders.push_back(partition_under(child));

    std::vector<int> order(learners.begin(), learners.end());
    std::sort(order.begin(), order.end(), [&](int a, int b) {
      const Range& ra = ranges_[a];
      const Range& rb = ranges_[b];
      if (ra.end != rb.end) return ra.end < rb.end;
      if (ra.begin != rb.begin) return ra.begin < rb.begin;
      return name_order_[a] < name_order_[b];
    });

    std::vector<size_t> at(degree, 0);  // current piece per child; only moves forward
    std::vector<Range> next(order.size());
    uint64_t progress = 0;
    long double progress_f = 0;
    for (size_t i = 0; i < order.size(); ++i) {
      const int rank = order[i];
      Range range{progress, 0};
      if (units_.exact) {
        range.end = progress + portion_[rank];
      } else {
        // Cumulative rounding: boundaries stay monotone and the last one is exactly `units`.
        progress_f += portion_f_[rank];
        const long double rounded = std::nearbyint(progress_f);
        range.end = i + 1 == order.size()
                        ? units_.units
                        : std::clamp(static_cast<uint64_t>(std::max<long double>(rounded, 0)),
                                     progress, units_.units);
      }
      progress = range.end;
      next[i] = range;
      split_by_holders(rank, range, holders, at, ops);
    }
    if (progress != units_.units)
      throw std::logic_error("flexreduce: portions under a branch do not add up to the units");
    for (size_t i = 0; i < order.size(); ++i) ranges_[order[i]] = next[i];
  }

  void divide_portion(int rank, int degree) {
    if (units_.exact)
      portion_[rank] /= static_cast<uint64_t>(degree);  // exact: units is a common multiple
    else
      portion_f_[rank] /= degree;
  }

  std::vector<Piece> partition_under(NodeId child) const {
    std::vector<int> ranks;
    for (int rank : topo_.learners_under(child))
      if (ranges_[rank].begin < ranges_[rank].end) ranks.push_back(rank);
    std::sort(ranks.begin(), ranks.end(),
              [&](int a, int b) { return ranges_[a].begin < ranges_[b].begin; });
    std::vector<Piece> pieces;
    pieces.reserve(ranks.size());
    for (int rank : ranks) pieces.push_back({ranges_[rank].end, rank});
    return pieces;
  }

  // One reduce op per maximal piece of `range` with a fixed set of holders.
  static void split_by_holders(int root, Range range,
                               const std::vector<std::vector<Piece>>& holders,
                               std::vector<size_t>& at, std::vector<ir::Op>& ops) {
    uint64_t pos = range.begin;
    while (pos < range.end) {
      uint64_t piece_end = range.end;
      ir::Op op;
      op.kind = ir::OpKind::Reduce;
      op.root = root;
      op.group.reserve(holders.size());
      for (size_t child = 0; child < holders.size(); ++child) {
        const auto& pieces = holders[child];
        while (pieces[at[child]].end <= pos) ++at[child];
        piece_end = std::min(piece_end, pieces[at[child]].end);
        op.group.push_back(pieces[at[child]].rank);
      }
      op.begin = pos;
      op.end = piece_end;
      pos = piece_end;
      // A lone holder that is the root already has its sum: nothing would move.
      if (op.group.size() == 1 && op.group.front() == root) continue;
      ops.push_back(std::move(op));
    }
  }

  // The all-gather: the reduce-scatter's steps in reverse order, each reduce turned into a
  // broadcast from its root (which now holds the final sum) to the same holders.
  static void append_mirror_all_gather(std::vector<ir::Step>& steps) {
    const size_t reduce_steps = steps.size();
    for (size_t i = reduce_steps; i-- > 0;) {
      ir::Step step{ir::Phase::AllGather, steps[i].level, steps[i].ops};
      for (auto& op : step.ops) op.kind = ir::OpKind::Broadcast;
      steps.push_back(std::move(step));
    }
  }

  const Topology& topo_;
  FlexReduceUnits units_;
  std::vector<Range> ranges_;            // current range per rank
  std::vector<uint64_t> portion_;        // exact mode: portion in units
  std::vector<long double> portion_f_;   // fallback mode
  std::vector<int> name_order_;          // rank -> position of its full name in sorted order
};

}  // namespace

FlexReduceUnits flexreduce_units(const Topology& topo) {
  // Degree product over each node's branch ancestors, top-down; saturates past 64 bits.
  std::vector<u128> product(topo.num_nodes(), 1);
  u128 units = 1;
  std::vector<NodeId> stack{topo.root()};
  while (!stack.empty()) {
    const NodeId n = stack.back();
    stack.pop_back();
    if (topo.is_learner(n)) {
      if (product[n] > kU64Max) return {kFallbackUnits, false};
      const u128 g = std::gcd(static_cast<uint64_t>(units), static_cast<uint64_t>(product[n]));
      units = units / g * product[n];
      if (units > kU64Max) return {kFallbackUnits, false};
      continue;
    }
    for (NodeId child : topo.children(n)) {
      product[child] = std::min<u128>(product[n] * static_cast<u128>(topo.degree(n)), kU64Max + 1);
      stack.push_back(child);
    }
  }
  return {static_cast<uint64_t>(units), true};
}

ir::Schedule plan_flexreduce(const Topology& topo) { return FlexReducePlanner(topo).plan(); }

}  // namespace flexplan
