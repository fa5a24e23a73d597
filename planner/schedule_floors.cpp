// A lower bound of a schedule's price in one walk over its hops (schedule_floors.hpp).
#include "planner/schedule_floors.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include <fmt/core.h>

#include "codegen/lowering.hpp"
#include "ir/pipeline_form.hpp"

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
  std::vector<uint32_t> touched;
  const auto add = [&](uint32_t direction, double share) {
    if (load[direction] == 0) touched.push_back(direction);
    load[direction] += share;
  };
  const auto units = static_cast<double>(schedule.units);
  std::vector<codegen::Hop> lowered;

  ScheduleFloors floors;
  floors.cost.chunk_bytes = params.chunk_bytes;
  for (size_t s = 0; s < schedule.steps.size(); ++s) {
    double hop_latency = 0, chain_latency = 0;
    const auto& ops = schedule.steps[s].ops;
    for (size_t i = 0; i < ops.size(); ++i) {
      const ir::Op& op = ops[i];
      const auto bad_rank = [&](int32_t rank) { return rank < 0 || rank >= topo.num_learners(); };
      if (bad_rank(op.root) || std::any_of(op.group.begin(), op.group.end(), bad_rank) ||
          op.end < op.begin || op.end > schedule.units)
        throw std::invalid_argument(fmt::format(
            "schedule '{}' step {} op {}: ranks must be in [0, {}) and the range [{}, {}) within "
            "[0, {})",
            schedule.algorithm, s, i, topo.num_learners(), op.begin, op.end, schedule.units));
      if (op.end == op.begin) continue;
      const double share = static_cast<double>(op.end - op.begin) / units;
      lowered.clear();
      codegen::append_hops(op, lowered);
      double chain = 0;
      for (size_t h = 0; h < lowered.size(); ++h) {
        NodeId a = topo.learner_node(lowered[h].src), b = topo.learner_node(lowered[h].dst);
        const NodeId receiver = b;
        double path = params.hop_overhead;
        while (a != b) {
          if (depth[a] >= depth[b]) {
            add(2 * static_cast<uint32_t>(a), share);
            path += latency[a];
            a = parent[a];
          } else {
            add(2 * static_cast<uint32_t>(b) + 1, share);
            path += latency[b];
            b = parent[b];
          }
          ++floors.links_walked;
        }
        if (reductions && hop_sums(op, lowered[h], h))
          add(static_cast<uint32_t>(2 * nodes) + static_cast<uint32_t>(receiver), share);
        hop_latency = std::max(hop_latency, path);
        chain += path;
      }
      if (op.shape == ir::OpShape::Chain && lowered.size() >= 2)
        chain_latency = std::max(chain_latency, chain);
    }
    StepCost step;
    for (const uint32_t direction : touched) {
      step.per_byte = std::max(step.per_byte, load[direction] * inverse_bandwidth[direction]);
      total[direction] += load[direction];
      load[direction] = 0;
    }
    touched.clear();
    step.hop_latency = hop_latency;
    // Only the slowest chain's latency, as a chain of share 0: ChainCost::at is at least the
    // latency. The chains' paces are left out: the evaluator keeps only the chains slowest at
    // its probe sizes (make_step), and floors with paces would keep others, which between probes
    // could price a step above the evaluator. The chain slowest at the smallest probe (1 byte)
    // is kept, and it costs at least the slowest latency less what one byte adds.
    if (chain_latency > 0) step.chains.push_back(ChainCost{chain_latency, 0, 0, 0});
    floors.cost.steps.push_back(std::move(step));
  }
  for (size_t d = 0; d < total.size(); ++d)
    floors.busiest_total = std::max(floors.busiest_total, total[d] * inverse_bandwidth[d]);
  return floors;
}

}  // namespace flexplan
