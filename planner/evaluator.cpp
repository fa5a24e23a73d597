// The general evaluator: prices any schedule by routing the hops the runtime will run.
#include <algorithm>
#include <limits>
#include <numeric>
#include <stdexcept>

#include <fmt/core.h>

#include "codegen/lowering.hpp"
#include "ir/pipeline_form.hpp"
#include "planner/cost_model.hpp"

namespace flexplan {
namespace {

// One hop of a step: its op, its round (the hop's place in its chain), its path's ends and
// latency, and its op's share of the message.
struct StepHop {
  uint32_t op;
  uint32_t round;
  NodeId from, to;
  double share;
  double latency;
  bool reduces;    // the receiver sums what arrives (hop_sums)
  uint32_t incast;  // its op's StarIncast, an index into the step's (0: none)
};

// Bytes (as a fraction of the message) per link direction for a set of hops, and the busiest
// direction's seconds per message byte. The tree is copied into flat arrays: adding hops is the
// evaluator's hot loop. Loads only grow between clears, so the busiest direction is tracked as
// hops are added, and a clear resets only the directions touched.
class LinkLoads {
 public:
  LinkLoads(const Topology& topo, double reduce_bandwidth)
      : inverse_reduce_bandwidth_(reduce_bandwidth > 0 ? 1 / reduce_bandwidth : 0),
        reduce_(topo.num_nodes(), 0),
        parent_(topo.num_nodes()),
        depth_(topo.num_nodes()),
        latency_(topo.num_nodes(), 0),
        inverse_bandwidth_(topo.num_nodes(), 0),
        up_(topo.num_nodes(), 0),
        down_(topo.num_nodes(), 0),
        is_touched_(topo.num_nodes(), 0) {
    for (NodeId n = 0; n < topo.num_nodes(); ++n) {
      parent_[n] = topo.parent(n);
      depth_[n] = topo.depth(n);
      if (n == topo.root()) continue;
      const double bandwidth = topo.uplink(n).bandwidth;
      if (!(bandwidth > 0))
        throw std::invalid_argument(
            fmt::format("link above '{}' has no bandwidth", topo.full_name(n)));
      inverse_bandwidth_[n] = 1 / bandwidth;
      latency_[n] = topo.uplink(n).latency;
    }
  }

  // `incast`: the hop's op's (star_incast), whose factor its root's side of the path carries.
  void add(const StepHop& hop, const StarIncast& incast) {
    NodeId a = hop.from, b = hop.to;
    const bool from_root = incast.root == a, to_root = incast.root == b;
    while (a != b) {
      if (depth_[a] >= depth_[b]) {
        touch(a);
        up_[a] += from_root ? hop.share * incast.at(a, depth_[a]) : hop.share;
        busiest_ = std::max(busiest_, up_[a] * inverse_bandwidth_[a]);
        a = parent_[a];
      } else {
        touch(b);
        down_[b] += to_root ? hop.share * incast.at(b, depth_[b]) : hop.share;
        busiest_ = std::max(busiest_, down_[b] * inverse_bandwidth_[b]);
        b = parent_[b];
      }
    }
  }

  // The hop's receiver sums its range: a load on that learner's reductions (when modelled).
  void add_reduction(const StepHop& hop) {
    if (inverse_reduce_bandwidth_ == 0) return;
    if (reduce_[hop.to] == 0) reducing_.push_back(hop.to);
    reduce_[hop.to] += hop.share;
    busiest_ = std::max(busiest_, reduce_[hop.to] * inverse_reduce_bandwidth_);
  }

  double busiest() const { return busiest_; }

  // Seconds per message byte of the busiest link direction on the hop's path (up from its
  // source, down to its destination).
  double busiest_on_path(const StepHop& hop) const {
    double busiest = 0;
    NodeId a = hop.from, b = hop.to;
    while (a != b) {
      if (depth_[a] >= depth_[b]) {
        busiest = std::max(busiest, up_[a] * inverse_bandwidth_[a]);
        a = parent_[a];
      } else {
        busiest = std::max(busiest, down_[b] * inverse_bandwidth_[b]);
        b = parent_[b];
      }
    }
    return busiest;
  }

  double path_latency(NodeId a, NodeId b) const {
    double latency = 0;
    while (a != b) {
      if (depth_[a] >= depth_[b]) {
        latency += latency_[a];
        a = parent_[a];
      } else {
        latency += latency_[b];
        b = parent_[b];
      }
    }
    return latency;
  }

  void clear() {
    for (NodeId n : touched_) {
      up_[n] = down_[n] = 0;
      is_touched_[n] = 0;
    }
    touched_.clear();
    for (NodeId n : reducing_) reduce_[n] = 0;
    reducing_.clear();
    busiest_ = 0;
  }

 private:
  void touch(NodeId n) {
    if (!is_touched_[n]) touched_.push_back(n);
    is_touched_[n] = 1;
  }

  double inverse_reduce_bandwidth_;
  std::vector<double> reduce_;     // by learner node: fraction of the message it sums
  std::vector<NodeId> reducing_;   // nodes with reduce_ > 0
  std::vector<NodeId> parent_;
  std::vector<int> depth_;
  std::vector<double> latency_, inverse_bandwidth_;  // of each node's uplink
  std::vector<double> up_, down_;
  std::vector<char> is_touched_;
  std::vector<NodeId> touched_;
  double busiest_ = 0;
};

// The indices of `hops` in round order, each round's in their order there (a stable sort by
// round): counted into place, as rounds are few and dense (a chain's hop k is round k). Indices,
// not the hops moved: a step of a large tree holds millions of hops (tree-chains at 4k
// learners: 16M), and a sorted copy would double the evaluator's memory.
void round_order(const std::vector<StepHop>& hops, std::vector<uint32_t>& order) {
  uint32_t rounds = 0;
  for (const StepHop& hop : hops) rounds = std::max(rounds, hop.round + 1);
  std::vector<size_t> start(rounds + 1, 0);
  for (const StepHop& hop : hops) ++start[hop.round + 1];
  for (uint32_t r = 0; r < rounds; ++r) start[r + 1] += start[r];
  order.resize(hops.size());
  for (size_t h = 0; h < hops.size(); ++h) order[start[hops[h].round]++] = static_cast<uint32_t>(h);
}

// Prices one step from its hops, taken in round order (`order`). `chain_of[op]` is the op's
// index among the step's chains of two hops or more, or -1.
StepCost price_step(const std::vector<StepHop>& hops, const std::vector<StarIncast>& incasts,
                    const std::vector<uint32_t>& order,
                    const std::vector<int>& chain_of, std::vector<ChainCost> chains,
                    LinkLoads& loads, double chunk_bytes) {
  double hop_latency = 0;
  for (const uint32_t h : order) {
    const StepHop& hop = hops[h];
    loads.add(hop, incasts[hop.incast]);
    if (hop.reduces) loads.add_reduction(hop);
    hop_latency = std::max(hop_latency, hop.latency);
  }
  const double per_byte = loads.busiest();
  if (!chains.empty()) {
    // Later chunks: at the pace the whole step's load allows on each hop's busiest link.
    for (const uint32_t h : order) {
      const StepHop& hop = hops[h];
      const int c = chain_of[hop.op];
      if (c < 0) continue;
      chains[c].steady = std::max(chains[c].steady, loads.busiest_on_path(hop) / hop.share);
    }
    // The first chunk: each hop at the pace its round's load allows.
    loads.clear();
    for (size_t begin = 0; begin < order.size();) {
      size_t end = begin;
      const uint32_t round = hops[order[begin]].round;
      while (end < order.size() && hops[order[end]].round == round) {
        const StepHop& hop = hops[order[end++]];
        loads.add(hop, incasts[hop.incast]);
      }
      for (size_t k = begin; k < end; ++k) {
        const StepHop& hop = hops[order[k]];
        const int c = chain_of[hop.op];
        if (c >= 0) chains[c].first_chunk += loads.busiest_on_path(hop) / hop.share;
      }
      loads.clear();
      begin = end;
    }
  }
  loads.clear();
  return make_step(per_byte, hop_latency, std::move(chains), chunk_bytes);
}

}  // namespace

void check_op_ranks(const ir::Schedule& schedule, const ir::Op& op, size_t step, size_t index,
                    int learners) {
  const auto bad_rank = [&](int32_t rank) { return rank < 0 || rank >= learners; };
  const bool bad = bad_rank(op.root) || std::any_of(op.group.begin(), op.group.end(), bad_rank);
  if (bad || op.end < op.begin || op.end > schedule.units)
    throw std::invalid_argument(fmt::format(
        "schedule '{}' step {} op {}: ranks must be in [0, {}) and the range [{}, {}) within "
        "[0, {})",
        schedule.algorithm, step, index, learners, op.begin, op.end, schedule.units));
}

StarIncast star_incast(const Topology& topo, const ir::Op& op, const CostParams& params) {
  StarIncast incast;
  if (op.shape != ir::OpShape::Star || params.incast_loss <= 0) return incast;
  const NodeId root = topo.learner_node(op.root);
  // The two shallowest common ancestors of the root and a member.
  int first = std::numeric_limits<int>::max(), second = first;
  for (const int32_t member : op.group) {
    if (member == op.root) continue;
    NodeId a = root, b = topo.learner_node(member);
    while (a != b) {
      if (topo.depth(a) >= topo.depth(b)) a = topo.parent(a);
      else b = topo.parent(b);
    }
    const int depth = topo.depth(a);
    if (depth < first) {
      second = first;
      first = depth;
    } else if (depth < second) {
      second = depth;
    }
    if (second == 0) break;  // the tree's root: no shallower
  }
  // Some ancestor of the root other than itself must lie below the second: depth(root) - 1.
  if (second == std::numeric_limits<int>::max() || topo.depth(root) - 1 <= second) return incast;
  incast.factor = 1 + params.incast_loss;
  incast.root = root;
  incast.deeper_than = second;
  return incast;
}

bool hop_sums(const ir::Op& op, const codegen::Hop& hop, size_t index) {
  if (op.kind != ir::OpKind::Reduce) return false;
  if (hop.dst_contributes) return true;
  return op.shape == ir::OpShape::Star && index > 0;
}

std::vector<StepCost> evaluate_steps(const Topology& topo, const ir::Schedule& schedule,
                                     const CostParams& params) {
  if (schedule.units == 0)
    throw std::invalid_argument(fmt::format("schedule '{}' has zero units", schedule.algorithm));
  LinkLoads loads(topo, params.reduce_bandwidth);
  // A compact pipeline is priced step by step of its expansion, read from the base: an op's
  // price depends on its ranks and its share of the units, not on where its range lies.
  const size_t step_count = ir::expanded_step_count(schedule, schedule.slices);
  std::vector<StepCost> costs;
  costs.reserve(step_count);
  const double units = static_cast<double>(ir::expanded_units(schedule));
  std::vector<StepHop> hops;
  std::vector<uint32_t> order;
  std::vector<int> chain_of;
  std::vector<StarIncast> incasts;  // the step's stars' whose flows meet; [0]: none
  for (size_t s = 0; s < step_count; ++s) {
    hops.clear();
    chain_of.clear();
    incasts.assign(1, StarIncast{});
    std::vector<ChainCost> chains;
    size_t i = 0;
    ir::for_each_expanded_op(schedule, schedule.slices, s, [&](size_t, const ir::Op& op) {
      const size_t index = i++;
      chain_of.push_back(-1);
      check_op_ranks(schedule, op, s, index, topo.num_learners());
      if (op.end == op.begin) return;
      const double share = static_cast<double>(op.end - op.begin) / units;
      const size_t first = hops.size();
      uint32_t round = 0;
      const auto lowered = codegen::lower_op(op);
      uint32_t incast = 0;
      if (const StarIncast star = star_incast(topo, op, params); star.factor != 1) {
        incast = static_cast<uint32_t>(incasts.size());
        incasts.push_back(star);
      }
      for (size_t h = 0; h < lowered.size(); ++h) {
        const codegen::Hop& hop = lowered[h];
        const NodeId from = topo.learner_node(hop.src), to = topo.learner_node(hop.dst);
        hops.push_back({static_cast<uint32_t>(index), round, from, to, share,
                        loads.path_latency(from, to) + params.hop_overhead,
                        hop_sums(op, hop, h), incast});
        if (op.shape == ir::OpShape::Chain) ++round;  // a star's hops run side by side
      }
      if (op.shape == ir::OpShape::Star)
        queue_star_hops(hops.size() - first, params.hop_overhead,
                        [&](size_t k) -> double& { return hops[first + k].latency; });
      // A one-hop op never outlasts the bandwidth term plus one hop's latency.
      if (op.shape == ir::OpShape::Chain && hops.size() - first >= 2) {
        chain_of[index] = static_cast<int>(chains.size());
        ChainCost chain;
        chain.share = share;
        for (size_t h = first; h < hops.size(); ++h) chain.latency += hops[h].latency;
        chains.push_back(chain);
      }
    });
    round_order(hops, order);
    costs.push_back(price_step(hops, incasts, order, chain_of, std::move(chains), loads, params.chunk_bytes));
  }
  return costs;
}

ScheduleCost evaluate_schedule(const Topology& topo, const ir::Schedule& schedule,
                               const CostParams& params) {
  ScheduleCost cost;
  cost.chunk_bytes = params.chunk_bytes;
  cost.steps = evaluate_steps(topo, schedule, params);
  return cost;
}

}  // namespace flexplan
