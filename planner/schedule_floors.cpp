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
  std::vector<double> load(2 * nodes, 0), total(2 * nodes, 0);
  std::vector<uint32_t> touched;
  const auto units = static_cast<double>(schedule.units);
  std::vector<codegen::Hop> lowered;

  ScheduleFloors floors;
  floors.cost.chunk_bytes = params.chunk_bytes;
  std::vector<ChainCost> chains;
  for (size_t s = 0; s < schedule.steps.size(); ++s) {
    double hop_latency = 0;
    chains.clear();
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
      // A chain's pace on each hop is its path's busiest link under loads that include the hop's
      // own share, so at least the path's slowest link: the first chunk pays each hop's, later
      // chunks the slowest hop's.
      ChainCost chain;
      chain.share = share;
      for (const codegen::Hop& hop : lowered) {
        NodeId a = topo.learner_node(hop.src), b = topo.learner_node(hop.dst);
        double path = params.hop_overhead, slowest = 0;
        while (a != b) {
          uint32_t direction;
          if (depth[a] >= depth[b]) {
            direction = 2 * static_cast<uint32_t>(a);
            path += latency[a];
            a = parent[a];
          } else {
            direction = 2 * static_cast<uint32_t>(b) + 1;
            path += latency[b];
            b = parent[b];
          }
          if (load[direction] == 0) touched.push_back(direction);
          load[direction] += share;
          slowest = std::max(slowest, inverse_bandwidth[direction]);
          ++floors.links_walked;
        }
        hop_latency = std::max(hop_latency, path);
        chain.latency += path;
        chain.first_chunk += slowest;
        chain.steady = std::max(chain.steady, slowest);
      }
      if (op.shape == ir::OpShape::Chain && lowered.size() >= 2) chains.push_back(chain);
    }
    double per_byte = 0;
    for (const uint32_t direction : touched) {
      per_byte = std::max(per_byte, load[direction] * inverse_bandwidth[direction]);
      total[direction] += load[direction];
      load[direction] = 0;
    }
    touched.clear();
    // ChainCost::at grows with first_chunk and steady, so chains with lower ones cost less.
    floors.cost.steps.push_back(make_step(per_byte, hop_latency, std::move(chains), params.chunk_bytes));
  }
  for (size_t d = 0; d < total.size(); ++d)
    floors.busiest_total = std::max(floors.busiest_total, total[d] * inverse_bandwidth[d]);
  return floors;
}

}  // namespace flexplan
