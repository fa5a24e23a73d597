// The paper's closed forms (Eq. 2, 3, 6), exact prices of the ring and hierarchical schedules,
// and the nccl-tests bandwidth conventions.
#include <algorithm>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

#include "planner/cost_model.hpp"
#include "planner/machines.hpp"

namespace flexplan {
namespace {

// A link separates learners when it has learners on both sides: only those carry all-reduce
// traffic in every algorithm.
bool separates_learners(const Topology& topo, NodeId n) {
  const size_t below = topo.learners_under(n).size();
  return n != topo.root() && below > 0 && below < static_cast<size_t>(topo.num_learners());
}

double slowest_separating_bandwidth(const Topology& topo) {
  double slowest = 0;
  for (NodeId n = 0; n < topo.num_nodes(); ++n) {
    if (!separates_learners(topo, n)) continue;
    const double w = topo.uplink(n).bandwidth;
    if (!(w > 0)) throw std::invalid_argument("a link that separates learners has no bandwidth");
    slowest = slowest == 0 ? w : std::min(slowest, w);
  }
  return slowest;
}

// The slowest hop of a ring visiting `ring` in order and back to its start: its alpha.
double slowest_ring_hop(const Topology& topo, std::span<const int> ring) {
  double slowest = 0;
  for (size_t i = 0; i < ring.size(); ++i)
    slowest = std::max(slowest, topo.path_latency(ring[i], ring[(i + 1) % ring.size()]));
  return slowest;
}

// Largest latency from any learner under `n` up to n's parent (n's own uplink included).
double max_latency_to_parent(const Topology& topo, NodeId n) {
  double worst = 0;
  for (int rank : topo.learners_under(n)) {
    double latency = 0;
    for (NodeId a = topo.learner_node(rank); a != topo.parent(n); a = topo.parent(a))
      latency += topo.uplink(a).latency;
    worst = std::max(worst, latency);
  }
  return worst;
}

}  // namespace

double hop_alpha(const Topology& topo, NodeId branch, const CostParams& params) {
  // The two children with the slowest climbs give the slowest path across the branch.
  double first = -1, second = -1;
  for (NodeId child : topo.children(branch)) {
    const double latency = max_latency_to_parent(topo, child);
    if (latency > first) {
      second = first;
      first = latency;
    } else if (latency > second) {
      second = latency;
    }
  }
  if (second < 0) return 0;
  return first + second + params.hop_overhead;
}

double ring_reduce_scatter_time(double bytes, int learners, double bandwidth, double alpha) {
  if (learners < 2) return 0;
  return (learners - 1) * (alpha + bytes / (learners * bandwidth));
}

namespace {

// A ring reduce-scatter and all-gather of `steps` one-hop steps each, at `link` seconds per
// message byte and `alpha` per step, each learner summing `summed` of the message per
// reduce-scatter step: one StepCost for all 2 * steps, or, with a reduce bandwidth, the
// reduce-scatter's apart (its sums are a resource beside the links, cost_model.hpp).
std::vector<StepCost> ring_phases(double link, double summed, double alpha, uint64_t steps,
                                  const CostParams& params) {
  if (!(params.reduce_bandwidth > 0))
    return {make_step(link, alpha, {}, params.chunk_bytes, 2 * steps)};
  return {make_step(std::max(link, summed / params.reduce_bandwidth), alpha, {},
                    params.chunk_bytes, steps),
          make_step(link, alpha, {}, params.chunk_bytes, steps)};
}

// 2(M - 1) one-hop ring steps over `ring` (in order, and back to its start), each moving 1/M of
// the message over the slowest link that separates ring members.
std::vector<StepCost> ring_steps(const Topology& topo, std::span<const int> ring,
                                 const CostParams& params) {
  const int m = static_cast<int>(ring.size());
  std::vector<int> members_under(topo.num_nodes(), 0);
  for (int rank : ring)
    for (NodeId a = topo.learner_node(rank); a >= 0; a = topo.parent(a)) ++members_under[a];
  double slowest = 0;  // seconds per byte
  for (NodeId n = 0; n < topo.num_nodes(); ++n)
    if (n != topo.root() && members_under[n] > 0 && members_under[n] < m)
      slowest = std::max(slowest, 1 / topo.uplink(n).bandwidth);
  const double alpha = slowest_ring_hop(topo, ring) + params.hop_overhead;
  return ring_phases(slowest / m, 1.0 / m, alpha, static_cast<uint64_t>(m - 1), params);
}

}  // namespace

ScheduleCost ring_cost(const Topology& topo, const CostParams& params) {
  ScheduleCost cost;
  cost.chunk_bytes = params.chunk_bytes;
  const auto ring = topo.learners_under(topo.root());
  if (ring.size() < 2) return cost;
  if (!(slowest_separating_bandwidth(topo) > 0))
    throw std::invalid_argument("a link that separates learners has no bandwidth");
  cost.steps = ring_steps(topo, ring, params);
  const uint64_t p = ring.size();
  cost.busy_floor = host_busy_floor(2 * (p - 1) * p, params);  // 2(P - 1) steps of P hops
  return cost;
}

ScheduleCost blueconnect_cost(const Topology& topo, const CostParams& params) {
  if (!topo.is_symmetric())
    throw std::invalid_argument("Eq. 3 (BlueConnect) needs a symmetric tree; '" + topo.name() +
                                "' is not");
  ScheduleCost cost;
  cost.chunk_bytes = params.chunk_bytes;
  double below = 1;            // prod_{i<l} delta_i: learners under one level-l child
  double slowest_share = 0;    // min over k <= l of omega_k / prod_{j<k} delta_j
  for (int level = 0; level < topo.num_levels(); ++level) {
    const NodeId y = topo.nodes_at_level(level).front();
    const int delta = topo.degree(y);
    const double omega = topo.uplink(topo.children(y).front()).bandwidth;  // level-l links
    const double share = omega / below;
    slowest_share = level == 0 ? share : std::min(slowest_share, share);
    // 2 x Eq. 2 on n / prod_{i<l} delta_i bytes among delta learners: 2(delta - 1) ring steps
    // (with a reduce bandwidth, the reduce-scatter's delta - 1 and the all-gather's apart).
    if (delta > 1)
      for (StepCost& step : ring_phases(1 / (delta * below * slowest_share), 1 / (delta * below),
                                        hop_alpha(topo, y, params),
                                        static_cast<uint64_t>(delta - 1), params))
        cost.steps.push_back(std::move(step));
    below *= delta;
  }
  return cost;
}

double flexreduce_time(const Topology& topo, double bytes, const CostParams& params) {
  double total = 0;
  std::vector<double> share(topo.num_nodes(), 0);  // f_{v,y}: share of the vector under v
  std::vector<NodeId> stack;
  for (int level = 0; level < topo.num_levels(); ++level) {
    double slowest = 0;
    for (NodeId y : topo.nodes_at_level(level)) {
      const int d = topo.degree(y);
      if (d < 2) continue;
      // Below y, the learners under each child together hold the whole vector once; a node v
      // deeper down holds the product of 1/degree over its ancestors strictly below y.
      double busiest = 0;
      stack.assign(topo.children(y).begin(), topo.children(y).end());
      for (NodeId c : topo.children(y)) share[c] = 1;
      while (!stack.empty()) {
        const NodeId v = stack.back();
        stack.pop_back();
        busiest = std::max(busiest, share[v] / topo.uplink(v).bandwidth);
        for (NodeId child : topo.children(v)) {
          share[child] = share[v] / topo.degree(v);
          stack.push_back(child);
        }
      }
      const double alpha = hop_alpha(topo, y, params);
      // Eq. 6's max over (k, x) of T_r(n f, d_y, w) = (d_y - 1)(alpha + n f / (d_y w)).
      slowest = std::max(slowest, ring_reduce_scatter_time(bytes * busiest, d, 1, alpha));
    }
    total += 2 * slowest;
  }
  return total;
}

ScheduleCost hierarchical_cost(const Topology& topo, const CostParams& params) {
  // The local steps are small (one op per machine): price them with the evaluator itself, so
  // they agree by construction; the leader ring, the big part, by its closed form.
  const auto machines = machines_of(topo);
  ir::Schedule local;
  local.units = 1;
  local.steps.resize(2);
  std::vector<int> leaders;
  for (const Machine& machine : machines) {
    leaders.push_back(machine.leader);
    if (machine.learners.size() < 2) continue;
    for (int s = 0; s < 2; ++s)
      local.steps.edit()[s].ops.push_back({s == 0 ? ir::OpKind::Reduce : ir::OpKind::Broadcast, 0, 1,
                                    machine.leader, machine.learners});
  }
  const auto local_steps = evaluate_steps(topo, local, params);
  ScheduleCost cost;
  cost.chunk_bytes = params.chunk_bytes;
  if (!local.steps[0].ops.empty()) cost.steps.push_back(local_steps[0]);
  if (leaders.size() >= 2)
    for (StepCost& step : ring_steps(topo, leaders, params)) cost.steps.push_back(std::move(step));
  if (!local.steps[1].ops.empty()) cost.steps.push_back(local_steps[1]);
  return cost;
}

double algorithm_bandwidth(double bytes, double seconds) {
  return seconds > 0 ? bytes / seconds : 0;
}

double bus_bandwidth(double bytes, double seconds, int learners) {
  if (learners < 1) return 0;
  return algorithm_bandwidth(bytes, seconds) * 2 * (learners - 1) / learners;
}

}  // namespace flexplan
