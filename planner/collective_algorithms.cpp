// Builders of the all-gather and broadcast schedules, and the transpose that turns them into
// reduce-scatter and reduce (collective_algorithms.hpp).
#include "planner/collective_algorithms.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <vector>

#include "ir/collective_contract.hpp"
#include "planner/machines.hpp"

namespace flexplan {

namespace {

std::vector<int32_t> depth_first_ranks(const Topology& topo) {
  const auto order = topo.learners_under(topo.root());
  return {order.begin(), order.end()};
}

ir::Schedule sharded(const Topology& topo, std::string algorithm) {
  ir::Schedule schedule;
  schedule.algorithm = std::move(algorithm);
  schedule.collective = ir::Collective::AllGather;
  schedule.units = static_cast<uint64_t>(std::max(topo.num_learners(), 1));
  return schedule;
}

ir::Op copy(uint64_t begin, uint64_t end, int32_t from, ir::RankList group,
            ir::OpShape shape = ir::OpShape::Chain) {
  ir::Op op;
  op.kind = ir::OpKind::Broadcast;
  op.begin = begin;
  op.end = end;
  op.root = from;
  op.group = std::move(group);
  op.shape = shape;
  return op;
}

// Ops copying the shards of `owners` from `from` to `to`, one op per run of adjacent units.
void copy_shards(std::vector<ir::Op>& ops, const ir::Schedule& schedule, int32_t world_size,
                 std::span<const int32_t> owners, int32_t from, int32_t to) {
  std::vector<ir::UnitRange> ranges;
  for (int32_t owner : owners) {
    const ir::UnitRange shard = ir::shard_of(schedule, world_size, owner);
    if (shard.begin == shard.end) continue;
    ranges.push_back(shard);
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const ir::UnitRange& a, const ir::UnitRange& b) { return a.begin < b.begin; });
  for (size_t i = 0; i < ranges.size();) {
    uint64_t end = ranges[i].end;
    size_t j = i + 1;
    while (j < ranges.size() && ranges[j].begin == end) end = ranges[j++].end;
    ops.push_back(copy(ranges[i].begin, end, from, {from, to}));
    i = j;
  }
}

ir::Step step_of(ir::Phase phase, int32_t level) {
  ir::Step step;
  step.phase = phase;
  step.level = level;
  return step;
}

int32_t top_level(const Topology& topo) { return topo.num_levels() - 1; }

// Every learner's shard to its machine's leader, in one step.
void append_machine_gather(std::vector<ir::Step>& steps, const ir::Schedule& schedule, int32_t p,
                           const std::vector<Machine>& machines) {
  ir::Step gather = step_of(ir::Phase::AllGather, 0);
  for (const Machine& machine : machines)
    for (int32_t learner : machine.learners)
      if (learner != machine.leader)
        copy_shards(gather.ops, schedule, p, std::span(&learner, 1), learner, machine.leader);
  if (!gather.ops.empty()) steps.push_back(std::move(gather));
}

// Each leader's whole vector to its machine, every unit as one star to the learners that lack it
// (a learner's own shard is not copied back: harmless here, but the transpose would count that
// learner's input twice, and one star per range keeps the transpose to one reduce per range).
void append_machine_scatter(std::vector<ir::Step>& steps, const ir::Schedule& schedule, int32_t p,
                            const std::vector<Machine>& machines) {
  ir::Step scatter = step_of(ir::Phase::Broadcast, 0);
  for (const Machine& machine : machines) {
    if (machine.learners.size() < 2) continue;
    std::vector<uint64_t> cuts{0, schedule.units};
    for (int32_t learner : machine.learners) {
      const ir::UnitRange own = ir::shard_of(schedule, p, learner);
      cuts.push_back(own.begin);
      cuts.push_back(own.end);
    }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    for (size_t c = 0; c + 1 < cuts.size(); ++c) {
      ir::RankList group{machine.leader};
      for (int32_t learner : machine.learners) {
        const ir::UnitRange own = ir::shard_of(schedule, p, learner);
        const bool holds = own.begin <= cuts[c] && cuts[c] < own.end;
        if (learner != machine.leader && !holds) group.push_back(learner);
      }
      if (group.size() > 1)
        scatter.ops.push_back(copy(cuts[c], cuts[c + 1], machine.leader, std::move(group),
                                   ir::OpShape::Star));
    }
  }
  if (!scatter.ops.empty()) steps.push_back(std::move(scatter));
}

}  // namespace

ir::Schedule plan_ring_allgather(const Topology& topo) {
  ir::Schedule schedule = sharded(topo, "ring");
  const std::vector<int32_t> ring = depth_first_ranks(topo);
  const int32_t p = static_cast<int32_t>(ring.size());
  auto& steps = schedule.steps.edit();
  // In step k the member at position i passes on the shard of position i - k.
  for (int32_t k = 0; k + 1 < p; ++k) {
    ir::Step step = step_of(ir::Phase::AllGather, top_level(topo));
    for (int32_t i = 0; i < p; ++i) {
      const int32_t owner = ring[static_cast<size_t>(((i - k) % p + p) % p)];
      copy_shards(step.ops, schedule, p, std::span(&owner, 1), ring[i], ring[(i + 1) % p]);
    }
    steps.push_back(std::move(step));
  }
  return schedule;
}

bool depth_first_is_rank_order(const Topology& topo) {
  const auto order = topo.learners_under(topo.root());
  for (size_t i = 0; i < order.size(); ++i)
    if (order[i] != static_cast<int>(i)) return false;
  return true;
}

ir::Schedule plan_bruck_allgather(const Topology& topo) {
  ir::Schedule schedule = sharded(topo, "bruck");
  const std::vector<int32_t> order = depth_first_ranks(topo);
  const int32_t p = static_cast<int32_t>(order.size());
  // Ranks in depth-first order (the usual numbering): a partner's shards are one or two runs of
  // units, found without listing them (P^2 / 2 shards over the rounds).
  const bool in_order = depth_first_is_rank_order(topo);
  auto& steps = schedule.steps.edit();
  // After round k the member at position i holds the shards of positions i .. i + 2^(k+1) - 1.
  for (int64_t distance = 1; distance < p; distance *= 2) {
    ir::Step step = step_of(ir::Phase::AllGather, top_level(topo));
    const int64_t count = std::min<int64_t>(distance, p - distance);
    for (int32_t i = 0; i < p; ++i) {
      const int32_t partner = static_cast<int32_t>((i + distance) % p);
      if (in_order) {
        const int64_t end = partner + count;  // positions [partner, end), wrapping past p
        const auto cut = [&](int64_t position) { return ir::shard_of(schedule, p, static_cast<int32_t>(position)).begin; };
        const uint64_t units = schedule.units;
        const uint64_t first_end = end <= p ? (end == p ? units : cut(end)) : units;
        if (cut(partner) < first_end) step.ops.push_back(copy(cut(partner), first_end, partner, {partner, i}));
        if (end > p && cut(0) < cut(end - p)) step.ops.push_back(copy(cut(0), cut(end - p), partner, {partner, i}));
        continue;
      }
      std::vector<int32_t> owners;
      for (int64_t b = 0; b < count; ++b) owners.push_back(order[(partner + b) % p]);
      copy_shards(step.ops, schedule, p, owners, order[partner], order[i]);
    }
    steps.push_back(std::move(step));
  }
  return schedule;
}

ir::Schedule plan_hierarchical_allgather(const Topology& topo) {
  ir::Schedule schedule = sharded(topo, "hierarchical");
  const int32_t p = topo.num_learners();
  const std::vector<Machine> machines = machines_of(topo);
  auto& steps = schedule.steps.edit();
  append_machine_gather(steps, schedule, p, machines);
  // A ring among the leaders, each passing on a machine's block of shards. Each block's runs of
  // units are found once (the ring passes each block M - 1 times).
  const int32_t m = static_cast<int32_t>(machines.size());
  std::vector<std::vector<ir::Op>> blocks(machines.size());
  size_t block_ops = 0;
  for (size_t b = 0; b < machines.size(); ++b) {
    copy_shards(blocks[b], schedule, p, machines[b].learners, machines[b].leader,
                machines[b].leader);
    block_ops += blocks[b].size();
  }
  for (int32_t k = 0; k + 1 < m; ++k) {
    ir::Step step = step_of(ir::Phase::AllGather, top_level(topo));
    step.ops.reserve(block_ops);
    for (int32_t i = 0; i < m; ++i) {
      const int32_t from = machines[i].leader, to = machines[(i + 1) % m].leader;
      for (const ir::Op& run : blocks[static_cast<size_t>(((i - k) % m + m) % m)])
        step.ops.push_back(copy(run.begin, run.end, from, {from, to}));
    }
    steps.push_back(std::move(step));
  }
  append_machine_scatter(steps, schedule, p, machines);
  return schedule;
}

namespace {

// A learner's place in the depth-first order, and the places a subtree's learners hold.
struct DepthFirst {
  const Topology& topo;
  const int* first;  // learners_under(root).data()
  explicit DepthFirst(const Topology& t) : topo(t), first(t.learners_under(t.root()).data()) {}
  size_t begin(NodeId n) const { return static_cast<size_t>(topo.learners_under(n).data() - first); }
  size_t end(NodeId n) const { return begin(n) + topo.learners_under(n).size(); }
  bool holds(NodeId n, size_t place) const { return begin(n) <= place && place < end(n); }
};

// Appends the learners under `node` in depth-first order, the child holding `last` last.
void append_subtree(const DepthFirst& order, NodeId node, size_t last, ir::RankList& chain) {
  const Topology& topo = order.topo;
  if (!order.holds(node, last) || topo.is_learner(node)) {
    // Its learners in depth-first order, as they are held.
    for (const int rank : topo.learners_under(node)) chain.push_back(rank);
    return;
  }
  NodeId deferred = -1;
  for (NodeId child : topo.children(node)) {
    if (order.holds(child, last)) {
      deferred = child;
      continue;
    }
    append_subtree(order, child, last, chain);
  }
  if (deferred >= 0) append_subtree(order, deferred, last, chain);
}

// The machine leaders in depth-first order, and the run of them under each node: a subtree
// that does not hold a chain's end adds its leaders as one run (as append_subtree would add the
// leaders among its learners, without walking every learner for every chain).
class LeaderOrder {
 public:
  LeaderOrder(const DepthFirst& order, const std::vector<bool>& leader) : order_(order) {
    const size_t p = order.topo.learners_under(order.topo.root()).size();
    for (size_t place = 0; place < p; ++place)
      if (leader[static_cast<size_t>(order.first[place])]) {
        ranks_.push_back(order.first[place]);
        places_.push_back(place);
      }
  }

  // The leaders append_subtree(order, node, last, chain) would add, in its order.
  void append(NodeId node, size_t last, ir::RankList& chain) const {
    const Topology& topo = order_.topo;
    if (!order_.holds(node, last) || topo.is_learner(node)) {
      const auto lo = std::lower_bound(places_.begin(), places_.end(), order_.begin(node));
      const auto hi = std::lower_bound(lo, places_.end(), order_.end(node));
      for (auto at = lo; at != hi; ++at) chain.push_back(ranks_[static_cast<size_t>(at - places_.begin())]);
      return;
    }
    NodeId deferred = -1;
    for (NodeId child : topo.children(node)) {
      if (order_.holds(child, last)) {
        deferred = child;
        continue;
      }
      append(child, last, chain);
    }
    if (deferred >= 0) append(deferred, last, chain);
  }

 private:
  const DepthFirst& order_;
  std::vector<int32_t> ranks_;
  std::vector<size_t> places_;
};

}  // namespace

ir::Schedule plan_tree_chains_allgather(const Topology& topo) {
  ir::Schedule schedule = sharded(topo, "tree-chains");
  const int32_t p = topo.num_learners();
  if (p < 2) return schedule;
  const DepthFirst order(topo);
  // The root's child above each place, to keep a chain's end out of its owner's.
  std::vector<NodeId> top_of(static_cast<size_t>(p), -1);
  for (NodeId child : topo.children(topo.root()))
    for (size_t place = order.begin(child); place < order.end(child); ++place) top_of[place] = child;
  ir::Step step = step_of(ir::Phase::AllGather, top_level(topo));
  for (size_t place = 0; place < static_cast<size_t>(p); ++place) {
    const int32_t owner = order.first[place];
    const ir::UnitRange shard = ir::shard_of(schedule, p, owner);
    if (shard.begin == shard.end) continue;
    // Half the order away; where that is in the owner's own child of the root (a child of more
    // than half the learners), the first place after that child.
    const NodeId home = top_of[place];
    size_t last = (place + static_cast<size_t>(p) / 2) % static_cast<size_t>(p);
    if (top_of[last] == home) last = order.end(home) % static_cast<size_t>(p);
    // Up from the owner: at each ancestor, its other children, the one holding `last` last.
    ir::RankList chain{owner};
    for (NodeId below = topo.learner_node(owner), above = topo.parent(below); above >= 0;
         below = above, above = topo.parent(above)) {
      NodeId deferred = -1;
      for (NodeId child : topo.children(above)) {
        if (child == below) continue;
        if (order.holds(child, last)) {
          deferred = child;
          continue;
        }
        append_subtree(order, child, last, chain);
      }
      if (deferred >= 0) append_subtree(order, deferred, last, chain);
    }
    step.ops.push_back(copy(shard.begin, shard.end, owner, std::move(chain)));
  }
  schedule.steps.edit().push_back(std::move(step));
  return schedule;
}

ir::Schedule plan_machine_chains_allgather(const Topology& topo) {
  ir::Schedule schedule = sharded(topo, "machine-chains");
  const int32_t p = topo.num_learners();
  if (p < 2) return schedule;
  const DepthFirst order(topo);
  const std::vector<Machine> machines = machines_of(topo);
  std::vector<NodeId> top_of(static_cast<size_t>(p), -1);
  for (NodeId child : topo.children(topo.root()))
    for (size_t place = order.begin(child); place < order.end(child); ++place) top_of[place] = child;
  std::vector<bool> leader(static_cast<size_t>(p), false);
  for (const Machine& machine : machines) leader[static_cast<size_t>(machine.leader)] = true;
  const LeaderOrder leaders(order, leader);
  auto& steps = schedule.steps.edit();
  append_machine_gather(steps, schedule, p, machines);
  ir::Step step = step_of(ir::Phase::AllGather, top_level(topo));
  for (const Machine& machine : machines) {
    const size_t place = order.begin(topo.learner_node(machine.learners.front()));
    const NodeId home = top_of[place];
    size_t last = (place + static_cast<size_t>(p) / 2) % static_cast<size_t>(p);
    if (top_of[last] == home) last = order.end(home) % static_cast<size_t>(p);
    // From the leader through every other machine: first the switches under its own machine
    // node, then up, the subtree holding `last` last at each node.
    const NodeId node = topo.parent(topo.learner_node(machine.leader));
    ir::RankList chain{machine.leader};
    const auto visit_others = [&](NodeId above, NodeId skip) {
      NodeId deferred = -1;
      for (NodeId child : topo.children(above)) {
        if (child == skip || (above == node && topo.is_learner(child))) continue;
        if (order.holds(child, last)) {
          deferred = child;
          continue;
        }
        leaders.append(child, last, chain);
      }
      if (deferred >= 0) leaders.append(deferred, last, chain);
    };
    visit_others(node, -1);
    for (NodeId below = node, above = topo.parent(node); above >= 0;
         below = above, above = topo.parent(above))
      visit_others(above, below);
    if (chain.size() < 2) continue;
    std::vector<ir::Op> block;
    copy_shards(block, schedule, p, machine.learners, machine.leader, machine.leader);
    for (ir::Op& op : block) {
      op.group = chain;
      step.ops.push_back(std::move(op));
    }
  }
  if (!step.ops.empty()) steps.push_back(std::move(step));
  append_machine_scatter(steps, schedule, p, machines);
  return schedule;
}

namespace {

// Runs sorted, with adjacent ones joined.
std::vector<ir::UnitRange> merged_runs(std::vector<ir::UnitRange> runs) {
  std::sort(runs.begin(), runs.end(),
            [](const ir::UnitRange& a, const ir::UnitRange& b) { return a.begin < b.begin; });
  std::vector<ir::UnitRange> merged;
  for (const ir::UnitRange& run : runs) {
    if (!merged.empty() && merged.back().end == run.begin)
      merged.back().end = run.end;
    else
      merged.push_back(run);
  }
  return merged;
}

// The runs of units a subtree's learners own, in unit order: one run when ranks follow the
// depth-first order, else the learners' shards merged.
std::vector<ir::UnitRange> subtree_runs(const Topology& topo, const ir::Schedule& schedule,
                                        bool in_order, NodeId node) {
  const int32_t p = topo.num_learners();
  const auto ranks = topo.learners_under(node);
  std::vector<ir::UnitRange> runs;
  if (in_order) {
    const ir::UnitRange run{ir::shard_of(schedule, p, ranks.front()).begin,
                            ir::shard_of(schedule, p, ranks.back()).end};
    if (run.begin < run.end) runs.push_back(run);
    return runs;
  }
  for (const int rank : ranks) {
    const ir::UnitRange shard = ir::shard_of(schedule, p, rank);
    if (shard.begin < shard.end) runs.push_back(shard);
  }
  return merged_runs(std::move(runs));
}

// [0, units) less the runs (sorted, disjoint).
std::vector<ir::UnitRange> complement_runs(const std::vector<ir::UnitRange>& runs, uint64_t units) {
  std::vector<ir::UnitRange> out;
  uint64_t at = 0;
  for (const ir::UnitRange& run : runs) {
    if (at < run.begin) out.push_back({at, run.begin});
    at = run.end;
  }
  if (at < units) out.push_back({at, units});
  return out;
}

// The runs of `from` less those of `less` (both sorted, disjoint).
std::vector<ir::UnitRange> subtract_runs(const std::vector<ir::UnitRange>& from,
                                         const std::vector<ir::UnitRange>& less) {
  std::vector<ir::UnitRange> out;
  size_t k = 0;
  for (ir::UnitRange run : from) {
    while (k < less.size() && less[k].end <= run.begin) ++k;
    for (size_t j = k; j < less.size() && less[j].begin < run.end; ++j) {
      if (run.begin < less[j].begin) out.push_back({run.begin, less[j].begin});
      run.begin = std::max(run.begin, less[j].end);
    }
    if (run.begin < run.end) out.push_back(run);
  }
  return out;
}

// Whether a branch's chain down runs on through the other learners of its child `c` (see
// plan_relay_tree_allgather): c is a machine (every child a learner, two or more) whose parent
// chains what lies outside it (not the root, two or more children).
bool folded_into_parent(const Topology& topo, NodeId c, bool through_machines) {
  if (!through_machines || !topo.is_machine(c) || topo.degree(c) < 2) return false;
  const NodeId v = topo.parent(c);
  return v >= 0 && v != topo.root() && topo.degree(v) >= 2;
}

// Each branch's relay (a learner under it): its child's whose path up to the branch is widest
// (the narrowest uplink on the way), the first such child in depth-first order.
std::vector<int32_t> relays_of(const Topology& topo) {
  const size_t nodes = static_cast<size_t>(topo.num_nodes());
  std::vector<int32_t> relay(nodes, -1);
  std::vector<double> width(nodes, 0);
  for (int32_t rank = 0; rank < topo.num_learners(); ++rank) {
    const NodeId n = topo.learner_node(rank);
    relay[static_cast<size_t>(n)] = rank;
    width[static_cast<size_t>(n)] = std::numeric_limits<double>::infinity();
  }
  for (int level = 0; level < topo.num_levels(); ++level)
    for (const NodeId v : topo.nodes_at_level(level)) {
      double best = -1;
      for (const NodeId c : topo.children(v)) {
        const double through = std::min(width[static_cast<size_t>(c)], topo.uplink(c).bandwidth);
        if (through > best) {
          best = through;
          relay[static_cast<size_t>(v)] = relay[static_cast<size_t>(c)];
        }
      }
      width[static_cast<size_t>(v)] = best;
    }
  return relay;
}

}  // namespace

ir::Schedule plan_relay_tree_allgather(const Topology& topo, bool through_machines, SiblingExchange exchange) {
  const bool stars = exchange == SiblingExchange::Stars;
  ir::Schedule schedule =
      sharded(topo, stars ? (through_machines ? "relay-machines-stars" : "relay-stars")
                          : (through_machines ? "relay-machines" : "relay-tree"));
  const int32_t p = topo.num_learners();
  if (p < 2) return schedule;
  const bool in_order = depth_first_is_rank_order(topo);
  const std::vector<int32_t> relay = relays_of(topo);
  const auto relay_of = [&](NodeId n) { return relay[static_cast<size_t>(n)]; };
  auto& steps = schedule.steps.edit();
  // Bottom-up, one step per level (branches of one level are disjoint subtrees): every child's
  // block through the other children's relays, starting after it, so that each relay receives
  // each sibling's block once (around a chain, or in a star from the child's relay).
  for (int level = 0; level < topo.num_levels(); ++level) {
    ir::Step step = step_of(ir::Phase::AllGather, level);
    for (const NodeId v : topo.nodes_at_level(level)) {
      const auto children = topo.children(v);
      const size_t d = children.size();
      if (d < 2) continue;
      for (size_t i = 0; i < d; ++i) {
        ir::RankList chain;
        for (size_t k = 0; k < d; ++k) chain.push_back(relay_of(children[(i + k) % d]));
        for (const ir::UnitRange& run : subtree_runs(topo, schedule, in_order, children[i]))
          step.ops.push_back(copy(run.begin, run.end, chain.front(), chain,
                                  stars ? ir::OpShape::Star : ir::OpShape::Chain));
      }
    }
    if (!step.ops.empty()) steps.push_back(std::move(step));
  }
  // Top-down by depth (the branches of one depth are disjoint too): a branch's relay holds what
  // lies outside it (from its parent's chains the steps before, and its siblings' blocks from
  // the exchange) and chains it through its other children's relays. With ranks in depth-first
  // order that is a run before the branch's block and one after it. Two ops on one chain share
  // its links hop for hop, and a small op's one chunk then waits on the large one at every hop
  // (the evaluator prices it so): the run before goes through the children in reverse order,
  // and a run under an eighth of the other goes in a step of its own after the depth's.
  const auto small_run = [&](const ir::UnitRange& run, const std::vector<ir::UnitRange>& runs) {
    uint64_t largest = 0;
    for (const ir::UnitRange& r : runs) largest = std::max(largest, r.end - r.begin);
    return in_order && 8 * (run.end - run.begin) < largest;
  };
  std::vector<ir::Step> down;
  for (NodeId v = 0; v < topo.num_nodes(); ++v) {
    if (topo.is_learner(v) || v == topo.root() || topo.degree(v) < 2) continue;
    const int32_t from = relay_of(v);
    ir::RankList chain{from};
    for (const NodeId c : topo.children(v))
      if (relay_of(c) != from) chain.push_back(relay_of(c));
    // Through machines: a machine child's other learners follow its relay in the chains of the
    // large runs, so that those reach them over the machine's own links in this step, beside
    // its NIC's, rather than in a step of its own; the machine's chain then carries only its
    // siblings' blocks and the small runs (whose one chunk would cross every learner).
    ir::RankList through{from};
    for (const NodeId c : topo.children(v)) {
      if (relay_of(c) != from) through.push_back(relay_of(c));
      if (folded_into_parent(topo, c, through_machines))
        for (const NodeId g : topo.children(c))
          if (topo.rank_of(g) != relay_of(c)) through.push_back(topo.rank_of(g));
    }
    const auto reverse_of = [&](const ir::RankList& forward) {
      ir::RankList backward{from};
      for (size_t k = forward.size(); k-- > 1;) backward.push_back(forward[k]);
      return backward;
    };
    const std::vector<ir::UnitRange> block = subtree_runs(topo, schedule, in_order, v);
    std::vector<ir::UnitRange> outside = complement_runs(block, schedule.units);
    if (folded_into_parent(topo, v, through_machines)) {
      const std::vector<ir::UnitRange> parent = subtree_runs(topo, schedule, in_order, topo.parent(v));
      std::vector<ir::UnitRange> runs = subtract_runs(parent, block);
      for (const ir::UnitRange& run : complement_runs(parent, schedule.units))
        if (small_run(run, complement_runs(parent, schedule.units))) runs.push_back(run);
      outside = merged_runs(std::move(runs));
    }
    const size_t depth = static_cast<size_t>(topo.depth(v));
    while (down.size() < 2 * depth) down.push_back(step_of(ir::Phase::Broadcast, 0));
    for (const ir::UnitRange& run : outside) {
      const bool before = in_order && !block.empty() && run.end <= block.front().begin;
      const bool small = small_run(run, outside);
      const ir::RankList& forward = small ? chain : through;
      ir::Step& step = down[2 * (depth - 1) + (small ? 1 : 0)];
      step.level = std::max(step.level, topo.level(v));
      step.ops.push_back(copy(run.begin, run.end, from, before ? reverse_of(forward) : forward));
    }
  }
  for (ir::Step& step : down)
    if (!step.ops.empty()) steps.push_back(std::move(step));
  return schedule;
}

RelayTreeSize relay_tree_size(const Topology& topo, bool through_machines) {
  RelayTreeSize size;
  const bool in_order = depth_first_is_rank_order(topo);
  for (NodeId v = 0; v < topo.num_nodes(); ++v) {
    if (topo.is_learner(v) || topo.degree(v) < 2) continue;
    const uint64_t d = static_cast<uint64_t>(topo.degree(v));
    const bool folded = folded_into_parent(topo, v, through_machines);
    // The learners whose runs a chain down may cover: v's, or its parent's where v's chain
    // carries only its siblings' blocks.
    const uint64_t learners = topo.learners_under(folded ? topo.parent(v) : v).size();
    // Runs: one per child and two outside when ranks follow the depth-first order; else at
    // most a run per learner under it, and one more outside.
    const uint64_t exchange = in_order ? topo.degree(v) : topo.learners_under(v).size();
    const uint64_t down = v == topo.root() ? 0 : in_order ? 2 : learners + 1;
    // A chain down goes through the children's relays, and the other learners of the
    // machines among them when they follow.
    uint64_t chain = d;
    for (const NodeId c : topo.children(v))
      if (folded_into_parent(topo, c, through_machines)) chain += static_cast<uint64_t>(topo.degree(c)) - 1;
    size.ops += exchange + down;
    size.members += exchange * d + down * chain;
  }
  return size;
}

namespace {

// The depth-first order rotated to start at the root.
std::vector<int32_t> from_root(const Topology& topo, int32_t root) {
  if (root < 0 || root >= topo.num_learners())
    throw std::invalid_argument(
        fmt::format("root {} is not among the {} learners", root, topo.num_learners()));
  std::vector<int32_t> order = depth_first_ranks(topo);
  std::rotate(order.begin(), std::find(order.begin(), order.end(), root), order.end());
  return order;
}

ir::Schedule whole(std::string algorithm, int32_t root) {
  ir::Schedule schedule;
  schedule.algorithm = std::move(algorithm);
  schedule.collective = ir::Collective::Broadcast;
  schedule.root = root;
  schedule.units = 1;
  return schedule;
}

}  // namespace

ir::Schedule plan_chain_broadcast(const Topology& topo, int32_t root) {
  ir::Schedule schedule = whole("chain", root);
  const std::vector<int32_t> order = from_root(topo, root);
  if (order.size() < 2) return schedule;
  ir::Step step = step_of(ir::Phase::Broadcast, top_level(topo));
  step.ops.push_back(copy(0, 1, root, ir::RankList(order.begin(), order.end())));
  schedule.steps.edit().push_back(std::move(step));
  return schedule;
}

ir::Schedule plan_binomial_broadcast(const Topology& topo, int32_t root) {
  ir::Schedule schedule = whole("binomial-tree", root);
  const std::vector<int32_t> order = from_root(topo, root);
  const size_t p = order.size();
  // The farthest hops first, so that the last rounds stay inside subtrees.
  std::vector<size_t> distances;
  for (size_t d = 1; d < p; d *= 2) distances.push_back(d);
  // Round r: every position q that holds the data (a multiple of 2 * d_r) sends to q + d_r.
  auto& steps = schedule.steps.edit();
  for (auto d = distances.rbegin(); d != distances.rend(); ++d) {
    ir::Step step = step_of(ir::Phase::Broadcast, top_level(topo));
    for (size_t q = 0; q + *d < p; q += 2 * *d)
      step.ops.push_back(copy(0, 1, order[q], {order[q], order[q + *d]}));
    steps.push_back(std::move(step));
  }
  return schedule;
}

ir::Schedule transpose_copies(const ir::Schedule& copies) {
  if (copies.collective != ir::Collective::AllGather &&
      copies.collective != ir::Collective::Broadcast)
    throw std::invalid_argument(fmt::format("transpose_copies: a {} schedule is not a copy",
                                            ir::to_string(copies.collective)));
  ir::Schedule out = copies;
  out.collective = copies.collective == ir::Collective::AllGather ? ir::Collective::ReduceScatter
                                                                  : ir::Collective::Reduce;
  // New steps, not an edit of the shared ones (which would copy them all first).
  out.steps = ir::SharedVector<ir::Step>{};
  auto& steps = out.steps.edit();
  steps.reserve(copies.steps.size());
  for (size_t s = copies.steps.size(); s-- > 0;) {
    const ir::Step* step = &copies.steps[s];
    ir::Step back = step_of(step->phase == ir::Phase::AllGather   ? ir::Phase::ReduceScatter
                            : step->phase == ir::Phase::Broadcast ? ir::Phase::Reduce
                                                                  : step->phase,
                            step->level);
    back.ops.reserve(step->ops.size());
    for (const ir::Op& op : step->ops) {
      if (op.kind != ir::OpKind::Broadcast)
        throw std::invalid_argument("transpose_copies: a reduce op in a copying schedule");
      ir::Op reduce = op;
      reduce.kind = ir::OpKind::Reduce;
      std::reverse(reduce.group.begin(), reduce.group.end());
      back.ops.push_back(std::move(reduce));
    }
    steps.push_back(std::move(back));
  }
  return out;
}

}  // namespace flexplan
