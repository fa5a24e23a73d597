// The general evaluator: prices any schedule by routing the hops the runtime will run.
#include <algorithm>
#include <limits>
#include <memory>
#include <numeric>
#include <span>
#include <stdexcept>

#include <fmt/core.h>

#include "codegen/lowering.hpp"
#include "ir/pipeline_form.hpp"
#include "planner/cost_model.hpp"

namespace flexplan {
namespace {

// One hop of a step: its path's ends and latency, its op's share of the message, and the chain
// it belongs to. A step's hops are kept by round (the hop's place in its chain; a star's hops
// are all round 0), each round's in op order: the pricing passes then read them in order
// instead of through an index (a step of a large tree holds millions of hops).
struct StepHop {
  double share;
  double latency;
  NodeId from, to;
  int32_t chain;    // its op's index among the step's chains of two hops or more, or -1
  uint32_t incast;  // its op's StarIncast, an index into the step's (0: none)
  bool reduces;     // the receiver sums what arrives (hop_sums)
};

// One base step's hops by round, each round's in op order, with the step's chains (as
// StepHop::chain numbers them) and its stars' incasts ([0]: none). A pipeline's expansion step
// holds several base steps (slice j runs base step t - j), and a base step is in `slices` of
// them: it is lowered once, and the expansion step's rounds are its base steps' rounds in
// slice order, which is the order the expansion lists its ops in.
struct BaseStepHops {
  std::vector<StepHop> hops;        // round 0's, then round 1's, ...
  std::vector<size_t> round_start;  // round r's hops are [round_start[r], round_start[r + 1])
  std::vector<ChainCost> chains;
  std::vector<StarIncast> incasts{StarIncast{}};

  size_t rounds() const { return round_start.empty() ? 0 : round_start.size() - 1; }
  std::span<const StepHop> round(size_t r) const {
    return {hops.data() + round_start[r], round_start[r + 1] - round_start[r]};
  }
  void clear() {
    hops.clear();
    round_start.clear();
    chains.clear();
    incasts.resize(1);
  }
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

// Prices one step from its base steps' hops (`parts`, in slice order): every hop of round 0,
// then of round 1, and so on, each round's in the parts' order.
StepCost price_step(const std::vector<const BaseStepHops*>& parts, LinkLoads& loads, double chunk_bytes) {
  size_t rounds = 0;
  std::vector<ChainCost> chains;
  std::vector<size_t> first_chain;  // each part's first chain in `chains`
  for (const BaseStepHops* part : parts) {
    rounds = std::max(rounds, part->rounds());
    first_chain.push_back(chains.size());
    chains.insert(chains.end(), part->chains.begin(), part->chains.end());
  }
  const auto each_hop = [&](size_t r, auto&& visit) {
    for (size_t p = 0; p < parts.size(); ++p)
      if (r < parts[p]->rounds())
        for (const StepHop& hop : parts[p]->round(r)) visit(*parts[p], first_chain[p], hop);
  };
  double hop_latency = 0;
  for (size_t r = 0; r < rounds; ++r)
    each_hop(r, [&](const BaseStepHops& part, size_t, const StepHop& hop) {
      loads.add(hop, part.incasts[hop.incast]);
      if (hop.reduces) loads.add_reduction(hop);
      hop_latency = std::max(hop_latency, hop.latency);
    });
  const double per_byte = loads.busiest();
  if (!chains.empty()) {
    // Later chunks: at the pace the whole step's load allows on each hop's busiest link.
    for (size_t r = 0; r < rounds; ++r)
      each_hop(r, [&](const BaseStepHops&, size_t first, const StepHop& hop) {
        if (hop.chain < 0) return;
        ChainCost& chain = chains[first + static_cast<size_t>(hop.chain)];
        chain.steady = std::max(chain.steady, loads.busiest_on_path(hop) / hop.share);
      });
    // The first chunk: each hop at the pace its round's load allows.
    loads.clear();
    for (size_t r = 0; r < rounds; ++r) {
      each_hop(r, [&](const BaseStepHops& part, size_t, const StepHop& hop) { loads.add(hop, part.incasts[hop.incast]); });
      each_hop(r, [&](const BaseStepHops&, size_t first, const StepHop& hop) {
        if (hop.chain >= 0) chains[first + static_cast<size_t>(hop.chain)].first_chunk += loads.busiest_on_path(hop) / hop.share;
      });
      loads.clear();
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

namespace {

// A step's ops hashed (the memo's key beside the units; phase and level do not price).
uint64_t hash_step(const ir::Step& step) {
  uint64_t h = 0x9e3779b97f4a7c15ULL ^ step.ops.size();
  const auto mix = [&h](uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdULL;
  };
  for (const ir::Op& op : step.ops) {
    mix(static_cast<uint64_t>(op.kind) | static_cast<uint64_t>(op.shape) << 8 |
        static_cast<uint64_t>(static_cast<uint32_t>(op.root)) << 16);
    mix(op.begin);
    mix(op.end);
    for (const int32_t rank : op.group) mix(static_cast<uint32_t>(rank));
  }
  return h;
}

}  // namespace

const StepCost* StepPriceMemo::find(const ir::Schedule& schedule, size_t step) const {
  if (schedule.slices != 1) return nullptr;
  const ir::Step& wanted = schedule.steps[step];
  const auto [first, last] = entries_.equal_range(hash_step(wanted));
  for (auto it = first; it != last; ++it) {
    const Entry& entry = it->second;
    if (entry.units != schedule.units) continue;
    if (entry.steps[entry.step].ops != wanted.ops) continue;
    ++found_;
    return &entry.cost;
  }
  return nullptr;
}

void StepPriceMemo::remember(const ir::Schedule& schedule, size_t step, const StepCost& cost) {
  if (schedule.slices != 1) return;
  entries_.emplace(hash_step(schedule.steps[step]), Entry{schedule.steps, step, schedule.units, cost});
}

std::vector<StepCost> evaluate_steps(const Topology& topo, const ir::Schedule& schedule,
                                     const CostParams& params, StepPriceMemo* memo) {
  if (schedule.units == 0)
    throw std::invalid_argument(fmt::format("schedule '{}' has zero units", schedule.algorithm));
  if (schedule.slices == 0)
    throw std::invalid_argument(fmt::format("schedule '{}' has zero slices", schedule.algorithm));
  LinkLoads loads(topo, params.reduce_bandwidth);
  // A compact pipeline is priced step by step of its expansion, read from the base: an op's
  // price depends on its ranks and its share of the units, not on where its range lies.
  const size_t step_count = ir::expanded_step_count(schedule, schedule.slices);
  std::vector<StepCost> costs;
  costs.reserve(step_count);
  const double units = static_cast<double>(ir::expanded_units(schedule));
  std::vector<codegen::Hop> lowered;  // one op's, reused
  // Base step b's hops, from expansion step b (where slice 0 runs it, first, so a bad op is
  // named as the expansion names it) through b + slices - 1, its last.
  std::vector<std::unique_ptr<BaseStepHops>> base_hops(schedule.steps.size());
  // Those past their last step, cleared, for later base steps to reuse their storage (a step of
  // a million learners holds millions of hops: freed and allocated again, every step's would
  // be mapped and faulted in anew).
  std::vector<std::unique_ptr<BaseStepHops>> spare;
  const auto lower_base_step = [&](size_t b) {
    std::unique_ptr<BaseStepHops> out;
    if (spare.empty()) {
      out = std::make_unique<BaseStepHops>();
    } else {
      out = std::move(spare.back());
      spare.pop_back();
    }
    // Two passes: the first checks every op and counts its hops into their rounds (a chain's
    // hop h is round h, a star's hops are all round 0), so that the second places each hop at
    // its place in round order directly.
    const auto& ops = schedule.steps[b].ops;
    std::vector<size_t>& start = out->round_start;
    for (size_t index = 0; index < ops.size(); ++index) {
      const ir::Op& op = ops[index];
      check_op_ranks(schedule, op, b, index, topo.num_learners());
      if (op.end == op.begin) continue;
      lowered.clear();
      codegen::append_hops(op, lowered);
      if (lowered.empty()) continue;
      const size_t rounds = op.shape == ir::OpShape::Star ? 1 : lowered.size();
      if (start.size() < rounds + 1) start.resize(rounds + 1, 0);
      if (op.shape == ir::OpShape::Star)
        start[1] += lowered.size();
      else
        for (size_t h = 0; h < rounds; ++h) ++start[h + 1];
    }
    for (size_t r = 1; r < start.size(); ++r) start[r] += start[r - 1];
    out->hops.resize(start.empty() ? 0 : start.back());
    std::vector<size_t> next(start.begin(), start.end());  // each round's next place
    for (const ir::Op& op : ops) {
      if (op.end == op.begin) continue;
      const double share = static_cast<double>(op.end - op.begin) / units;
      lowered.clear();
      codegen::append_hops(op, lowered);
      if (lowered.empty()) continue;
      uint32_t incast = 0;
      if (const StarIncast star = star_incast(topo, op, params); star.factor != 1) {
        incast = static_cast<uint32_t>(out->incasts.size());
        out->incasts.push_back(star);
      }
      const auto hop_at = [&](size_t h) {
        const codegen::Hop& hop = lowered[h];
        const NodeId from = topo.learner_node(hop.src), to = topo.learner_node(hop.dst);
        return StepHop{share, loads.path_latency(from, to) + params.hop_overhead, from, to, -1, incast,
                       hop_sums(op, hop, h)};
      };
      if (op.shape == ir::OpShape::Star) {
        // A star's hops run side by side, next to each other in round 0.
        const size_t first = next[0];
        for (size_t h = 0; h < lowered.size(); ++h) out->hops[next[0]++] = hop_at(h);
        queue_star_hops(lowered.size(), params.hop_overhead,
                        [&](size_t k) -> double& { return out->hops[first + k].latency; });
        continue;
      }
      // A one-hop op never outlasts the bandwidth term plus one hop's latency, so only longer
      // chains are priced as chains.
      const bool chain = lowered.size() >= 2;
      ChainCost cost;
      cost.share = share;
      for (size_t h = 0; h < lowered.size(); ++h) {
        StepHop hop = hop_at(h);
        if (chain) hop.chain = static_cast<int32_t>(out->chains.size());
        cost.latency += hop.latency;
        out->hops[next[h]++] = hop;
      }
      if (chain) out->chains.push_back(cost);
    }
    return out;
  };
  std::vector<const BaseStepHops*> parts;
  const uint32_t slices = schedule.slices;
  for (size_t t = 0; t < step_count; ++t) {
    if (const StepCost* known = memo != nullptr ? memo->find(schedule, t) : nullptr) {
      costs.push_back(*known);
      continue;
    }
    parts.clear();
    for (size_t j = ir::first_slice_in_step(schedule, t); j <= ir::last_slice_in_step(slices, t); ++j) {
      auto& part = base_hops[t - j];
      if (!part) part = lower_base_step(t - j);
      parts.push_back(part.get());
    }
    costs.push_back(price_step(parts, loads, params.chunk_bytes));
    if (memo != nullptr) memo->remember(schedule, t, costs.back());
    if (t + 1 >= slices) {  // (base step t + 1 - slices has had its last step)
      auto& done = base_hops[t + 1 - slices];
      done->clear();
      spare.push_back(std::move(done));
    }
  }
  return costs;
}

ScheduleCost evaluate_schedule(const Topology& topo, const ir::Schedule& schedule,
                               const CostParams& params, StepPriceMemo* memo) {
  ScheduleCost cost;
  cost.chunk_bytes = params.chunk_bytes;
  cost.steps = evaluate_steps(topo, schedule, params, memo);
  return cost;
}

}  // namespace flexplan
