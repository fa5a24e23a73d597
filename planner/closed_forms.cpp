// The paper's closed forms (Eq. 2, 3, 6), the information floor, and bandwidth conventions.
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

LinearCost ring_cost(const Topology& topo, const CostParams& params) {
  const auto ring = topo.learners_under(topo.root());
  const int p = static_cast<int>(ring.size());
  if (p < 2) return {};
  const double alpha = slowest_ring_hop(topo, ring) + params.hop_overhead;
  const double w = slowest_separating_bandwidth(topo);
  // 2 x Eq. 2: (P - 1) hops of alpha, and (P - 1) chunks of n / P over the slowest link.
  return {2.0 * (p - 1) * alpha, 2.0 * (p - 1) / (p * w)};
}

LinearCost blueconnect_cost(const Topology& topo, const CostParams& params) {
  if (!topo.is_symmetric())
    throw std::invalid_argument("Eq. 3 (BlueConnect) needs a symmetric tree; '" + topo.name() +
                                "' is not");
  LinearCost cost;
  double below = 1;            // prod_{i<l} delta_i: learners under one level-l child
  double slowest_share = 0;    // min over k <= l of omega_k / prod_{j<k} delta_j
  for (int level = 0; level < topo.num_levels(); ++level) {
    const NodeId y = topo.nodes_at_level(level).front();
    const int delta = topo.degree(y);
    const double omega = topo.uplink(topo.children(y).front()).bandwidth;  // level-l links
    const double share = omega / below;
    slowest_share = level == 0 ? share : std::min(slowest_share, share);
    // 2 x Eq. 2 on n / prod_{i<l} delta_i bytes among delta learners.
    cost.latency += 2.0 * (delta - 1) * hop_alpha(topo, y, params);
    cost.per_byte += 2.0 * (delta - 1) / (delta * below * slowest_share);
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

namespace {

// One machine's local chain (plan_hierarchical): its learners in depth-first order, the leader
// the lowest rank. Returns the latencies of the reduce chain (ending at the leader) and of the
// broadcast chain (starting there).
std::pair<double, double> local_chain_latencies(const Topology& topo, const Machine& machine,
                                                const CostParams& params) {
  const std::vector<int32_t>& learners = machine.learners;
  const size_t k = learners.size();
  const size_t leader = static_cast<size_t>(
      std::find(learners.begin(), learners.end(), machine.leader) - learners.begin());
  const auto latency = [&](size_t i) { return topo.uplink(topo.learner_node(learners[i])).latency; };
  double all = 0;
  for (size_t i = 0; i < k; ++i) all += latency(i);
  // Sibling hops cross two uplinks; every learner but the chain's two ends is crossed twice.
  const double hops = static_cast<double>(k - 1) * params.hop_overhead;
  const double reduce = 2 * all - latency((leader + 1) % k) - latency(leader) + hops;
  const double broadcast = 2 * all - latency(leader) - latency((leader + k - 1) % k) + hops;
  return {reduce, broadcast};
}

}  // namespace

LinearCost hierarchical_cost(const Topology& topo, const CostParams& params) {
  LinearCost cost;
  double reduce_latency = 0, broadcast_latency = 0, slowest_local = 0;
  std::vector<int> leaders;
  std::vector<int> leaders_under(topo.num_nodes(), 0);
  for (const Machine& machine : machines_of(topo)) {
    leaders.push_back(machine.leader);
    for (NodeId a = topo.learner_node(machine.leader); a >= 0; a = topo.parent(a))
      ++leaders_under[a];
    if (machine.learners.size() < 2) continue;
    const auto [reduce, broadcast] = local_chain_latencies(topo, machine, params);
    reduce_latency = std::max(reduce_latency, reduce);
    broadcast_latency = std::max(broadcast_latency, broadcast);
    // Each learner link carries the whole vector at least one way.
    for (int rank : machine.learners)
      slowest_local = std::max(slowest_local, 1 / topo.uplink(topo.learner_node(rank)).bandwidth);
  }
  cost.latency = reduce_latency + broadcast_latency;
  cost.per_byte = 2 * slowest_local;

  // The leader ring in depth-first order crosses each link separating leaders once each way
  // per step, with 1/M of the vector.
  const int m = static_cast<int>(leaders.size());
  if (m < 2) return cost;
  const double alpha = slowest_ring_hop(topo, leaders);
  double slowest = 0;
  for (NodeId n = 0; n < topo.num_nodes(); ++n)
    if (n != topo.root() && leaders_under[n] > 0 && leaders_under[n] < m)
      slowest = std::max(slowest, 1 / topo.uplink(n).bandwidth);
  cost.latency += 2.0 * (m - 1) * (alpha + params.hop_overhead);
  cost.per_byte += 2.0 * (m - 1) / m * slowest;
  return cost;
}

double information_floor(const Topology& topo, double bytes) {
  double worst = 0;
  for (NodeId n = 0; n < topo.num_nodes(); ++n)
    if (separates_learners(topo, n)) worst = std::max(worst, bytes / topo.uplink(n).bandwidth);
  return worst;
}

double algorithm_bandwidth(double bytes, double seconds) {
  return seconds > 0 ? bytes / seconds : 0;
}

double bus_bandwidth(double bytes, double seconds, int learners) {
  if (learners < 1) return 0;
  return algorithm_bandwidth(bytes, seconds) * 2 * (learners - 1) / learners;
}

}  // namespace flexplan
