// A lower bound of a schedule's price in one walk over its hops (schedule_floors.hpp).
#include "planner/schedule_floors.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include <fmt/core.h>

#include "codegen/lowering.hpp"
#include "ir/pipeline_form.hpp"
#include "planner/pipeline.hpp"

namespace flexplan {

ScheduleFloors schedule_floors(const Topology& topo, const ir::Schedule& schedule,
                               const CostParams& params) {
  ir::require_materialized(schedule, "schedule_floors");
  if (schedule.units == 0)
    throw std::invalid_argument(fmt::format("schedule '{}' has zero units", schedule.algorithm));
  const size_t nodes = static_cast<size_t>(topo.num_nodes());
  // Link directions: 2 * node for the node's uplink going up, 2 * node + 1 going down.
  std::vector<NodeId> parent(nodes);
  std::vector<int> depth(nodes);
  std::vector<double> latency(nodes, 0), inverse_bandwidth(2 * nodes, 0);
  for (NodeId n = 0; n < static_cast<NodeId>(nodes); ++n) {
    parent[n] = topo.parent(n);
    depth[n] = topo.depth(n);
    if (n == topo.root()) continue;
    inverse_bandwidth[2 * n] = inverse_bandwidth[2 * n + 1] = 1 / topo.uplink(n).bandwidth;
    latency[n] = topo.uplink(n).latency;
  }
  // A learner's reductions are one more resource, "direction" 2 * nodes + node, as in the
  // evaluator, so that the bandwidth term is the evaluator's own.
  const bool reductions = params.reduce_bandwidth > 0;
  if (reductions) inverse_bandwidth.resize(3 * nodes, 1 / params.reduce_bandwidth);
  std::vector<double> load(inverse_bandwidth.size(), 0), total(inverse_bandwidth.size(), 0);
  // Each direction enters `touched` once per step, so it never holds more than there are. The
  // walk below is the hot loop of planning a large tree: raw arrays and local counters keep its
  // state in registers (through vectors, every push_back made the compiler reload the rest).
  std::vector<uint32_t> touched(load.size());
  size_t touched_count = 0;
  double* const loads = load.data();
  uint32_t* const touched_at = touched.data();
  const NodeId* const up = parent.data();
  const int* const level = depth.data();
  const double* const link_latency = latency.data();
  const auto add = [&](uint32_t direction, double share) {
    if (loads[direction] == 0) touched_at[touched_count++] = direction;
    loads[direction] += share;
  };
  const auto units = static_cast<double>(schedule.units);
  std::vector<codegen::Hop> lowered;
  std::vector<double> star_latencies;  // one star op's hops, queued at its root
  uint64_t walked = 0;

  ScheduleFloors floors;
  floors.cost.chunk_bytes = params.chunk_bytes;
  floors.work_before_at_least.assign(schedule.steps.size() + 1, 0);
  const auto path_directions = static_cast<uint32_t>(2 * nodes);
  for (size_t s = 0; s < schedule.steps.size(); ++s) {
    double hop_latency = 0, chain_latency = 0;
    uint64_t chains = 0, chain_hops = 0;
    const auto& ops = schedule.steps[s].ops;
    for (size_t i = 0; i < ops.size(); ++i) {
      const ir::Op& op = ops[i];
      check_op_ranks(schedule, op, s, i, topo.num_learners());
      if (op.end == op.begin) continue;
      const double share = static_cast<double>(op.end - op.begin) / units;
      lowered.clear();
      codegen::append_hops(op, lowered);
      const size_t hops = lowered.size();
      // As the pricers load the links (cost_model.hpp, StarIncast): still their floor.
      const StarIncast incast = star_incast(topo, op, params);
      double chain = 0;
      for (size_t h = 0; h < hops; ++h) {
        NodeId a = topo.learner_node(lowered[h].src), b = topo.learner_node(lowered[h].dst);
        const NodeId receiver = b;
        const bool from_root = incast.root == a, to_root = incast.root == b;
        double path = params.hop_overhead;
        while (a != b) {
          if (level[a] >= level[b]) {
            add(2 * static_cast<uint32_t>(a), from_root ? share * incast.at(a, level[a]) : share);
            path += link_latency[a];
            a = up[a];
          } else {
            add(2 * static_cast<uint32_t>(b) + 1, to_root ? share * incast.at(b, level[b]) : share);
            path += link_latency[b];
            b = up[b];
          }
          ++walked;
        }
        if (reductions && hop_sums(op, lowered[h], h))
          add(static_cast<uint32_t>(2 * nodes) + static_cast<uint32_t>(receiver), share);
        if (op.shape == ir::OpShape::Star)
          star_latencies.push_back(path);
        else
          hop_latency = std::max(hop_latency, path);
        chain += path;
      }
      queue_star_hops(star_latencies.size(), params.hop_overhead,
                      [&](size_t k) -> double& { return star_latencies[k]; });
      for (const double latency : star_latencies) hop_latency = std::max(hop_latency, latency);
      star_latencies.clear();
      if (op.shape == ir::OpShape::Chain && hops >= 2) {
        chain_latency = std::max(chain_latency, chain);
        ++chains;
        chain_hops += hops;
      }
    }
    // At most the pricer's work on this step (pricing_work_before): each distinct link
    // direction of the step is in at least one of its rounds.
    const auto on_paths = static_cast<uint64_t>(std::count_if(
        touched_at, touched_at + touched_count, [&](uint32_t d) { return d < path_directions; }));
    const uint64_t entries_at_least = touched_count + (chains > 0 ? on_paths : 0);
    floors.work_before_at_least[s + 1] = floors.work_before_at_least[s] + 2 * chain_hops + chains +
                                         entries_at_least / PipelinePricer::kLoadEntriesPerWork;
    StepCost step;
    for (size_t t = 0; t < touched_count; ++t) {
      const uint32_t direction = touched_at[t];
      step.per_byte = std::max(step.per_byte, load[direction] * inverse_bandwidth[direction]);
      total[direction] += load[direction];
      load[direction] = 0;
    }
    touched_count = 0;
    step.hop_latency = hop_latency;
    // Only the slowest chain's latency, as a chain of share 0: ChainCost::at is at least the
    // latency. The chains' paces are left out: the evaluator keeps only the chains slowest at
    // its probe sizes (make_step), and floors with paces would keep others, which between probes
    // could price a step above the evaluator. The chain slowest at the smallest probe (1 byte)
    // is kept, and it costs at least the slowest latency less what one byte adds.
    if (chain_latency > 0) step.chains.push_back(ChainCost{chain_latency, 0, 0, 0});
    floors.cost.steps.push_back(std::move(step));
  }
  floors.links_walked = walked;
  for (size_t d = 0; d < total.size(); ++d)
    floors.busiest_total = std::max(floors.busiest_total, total[d] * inverse_bandwidth[d]);
  return floors;
}

ScheduleFloors floors_from_pricer(PipelinePricer& pricer, const CostParams& params) {
  ScheduleFloors floors;
  floors.cost.chunk_bytes = params.chunk_bytes;
  floors.cost.steps = pricer.step_floors();
  floors.busiest_total = pricer.busiest_total();
  floors.links_walked = pricer.links_walked();
  floors.work_before_at_least = pricer.work_before();
  return floors;
}

std::vector<uint64_t> pricing_work_before(const Topology& topo, const ir::Schedule& schedule,
                                          const CostParams& params) {
  ir::require_materialized(schedule, "pricing_work_before");
  const size_t nodes = static_cast<size_t>(topo.num_nodes());
  std::vector<NodeId> parent(nodes);
  std::vector<int> depth(nodes);
  for (NodeId n = 0; n < static_cast<NodeId>(nodes); ++n) {
    parent[n] = topo.parent(n);
    depth[n] = topo.depth(n);
  }
  const bool reductions = params.reduce_bandwidth > 0;
  // Distinct link directions (and, with reductions, learners reducing) per step, and per
  // (step, round): a stamp per direction, hops walked in order of round within a step.
  std::vector<uint64_t> in_step(3 * nodes, 0), in_round(2 * nodes, 0);
  uint64_t step_stamp = 0, round_stamp = 0;
  struct Hop {
    NodeId from, to;
    uint32_t round;
    bool chain;  // of a chain of two hops or more
    bool sums;
  };
  std::vector<Hop> hops;
  std::vector<codegen::Hop> lowered;
  std::vector<size_t> round_begin, by_round;
  std::vector<uint64_t> before(schedule.steps.size() + 1, 0);
  for (size_t s = 0; s < schedule.steps.size(); ++s) {
    hops.clear();
    uint64_t chains = 0;
    const auto& ops = schedule.steps[s].ops;
    for (size_t i = 0; i < ops.size(); ++i) {
      const ir::Op& op = ops[i];
      check_op_ranks(schedule, op, s, i, topo.num_learners());
      if (op.end == op.begin) continue;
      lowered.clear();
      codegen::append_hops(op, lowered);
      const bool chain = op.shape == ir::OpShape::Chain && lowered.size() >= 2;
      chains += chain;
      uint32_t round = 0;
      for (size_t h = 0; h < lowered.size(); ++h) {
        hops.push_back({topo.learner_node(lowered[h].src), topo.learner_node(lowered[h].dst), round,
                        chain, reductions && hop_sums(op, lowered[h], h)});
        if (op.shape == ir::OpShape::Chain) ++round;  // a star's hops run side by side
      }
    }
    uint32_t rounds = 0;
    for (const Hop& hop : hops) rounds = std::max(rounds, hop.round + 1);
    round_begin.assign(rounds + 1, 0);
    for (const Hop& hop : hops) ++round_begin[hop.round + 1];
    for (uint32_t r = 0; r < rounds; ++r) round_begin[r + 1] += round_begin[r];
    by_round.resize(hops.size());
    {
      std::vector<size_t> next(round_begin.begin(), round_begin.end() - 1);
      for (size_t h = 0; h < hops.size(); ++h) by_round[next[hops[h].round]++] = h;
    }
    ++step_stamp;
    uint64_t step_entries = 0, round_entries = 0, chain_hops = 0;
    const auto count = [&](uint32_t direction) {
      if (in_step[direction] != step_stamp) {
        in_step[direction] = step_stamp;
        ++step_entries;
      }
    };
    for (uint32_t r = 0; r < rounds; ++r) {
      ++round_stamp;
      for (size_t i = round_begin[r]; i < round_begin[r + 1]; ++i) {
        const Hop& hop = hops[by_round[i]];
        chain_hops += hop.chain;
        if (hop.sums) count(static_cast<uint32_t>(2 * nodes) + static_cast<uint32_t>(hop.to));
        NodeId a = hop.from, b = hop.to;
        while (a != b) {
          uint32_t direction;
          if (depth[a] >= depth[b]) {
            direction = 2 * static_cast<uint32_t>(a);
            a = parent[a];
          } else {
            direction = 2 * static_cast<uint32_t>(b) + 1;
            b = parent[b];
          }
          count(direction);
          if (in_round[direction] != round_stamp) {
            in_round[direction] = round_stamp;
            ++round_entries;
          }
        }
      }
    }
    // As PipelinePricer counts: chain hops walked twice, chains, and load entries (the step's
    // and, with chains, each round's).
    const uint64_t entries = step_entries + (chains > 0 ? round_entries : 0);
    before[s + 1] = before[s] + 2 * chain_hops + chains + entries / PipelinePricer::kLoadEntriesPerWork;
  }
  return before;
}

}  // namespace flexplan
