// The sparse all-reduce's cost on a tree (planner/sparse_cost.hpp).
#include "planner/sparse_cost.hpp"

#include <algorithm>
#include <map>
#include <vector>

namespace flexplan {
namespace {

struct Machines {
  std::map<NodeId, std::vector<int>> learners;  // machine node -> ranks
};

Machines machines_of(const Topology& topo) {
  Machines out;
  for (int rank = 0; rank < topo.num_learners(); ++rank)
    out.learners[topo.parent(topo.learner_node(rank))].push_back(rank);
  return out;
}

double to_root_latency(const Topology& topo, NodeId n) {
  double latency = 0;
  for (; n != topo.root(); n = topo.parent(n)) latency += topo.uplink(n).latency;
  return latency;
}

}  // namespace

SparseCost sparse_allreduce_cost(const Topology& topo, double bytes, double element_bytes,
                                 double density, const CostParams& params,
                                 const SparseCostParams& sparse) {
  SparseCost cost;
  const Machines machines = machines_of(topo);
  const double count = bytes / element_bytes;
  const double pair_bytes = sparse.index_bytes + element_bytes;
  const double m = static_cast<double>(machines.learners.size());

  // Steps 1 and 4, and MSTopK, per machine.
  for (const auto& [machine, ranks] : machines.learners) {
    const double n = static_cast<double>(ranks.size());
    cost.topk = std::max(cost.topk, count / n * sparse.mstopk_seconds_per_element);
    if (ranks.size() < 2) continue;
    double slowest = 0, latency = 0;
    for (int rank : ranks) {
      const Link& link = topo.uplink(topo.learner_node(rank));
      slowest = std::max(slowest, 1 / link.bandwidth);
      latency = std::max(latency, 2 * link.latency);
    }
    const double moves = latency + params.hop_overhead + (n - 1) / n * bytes * slowest;
    // The runtime sums the n - 1 received parts of its slice once they have all arrived.
    const double sums = params.reduce_bandwidth > 0 ? (n - 1) / n * bytes / params.reduce_bandwidth : 0;
    cost.reduce_scatter = std::max(cost.reduce_scatter, moves + sums);
    cost.all_gather = std::max(cost.all_gather, moves);
  }

  // Step 3 over every link.
  if (m < 2) return cost;
  std::vector<int> machines_below(static_cast<size_t>(topo.num_nodes()), 0);
  double busiest = 0, latency = 0;
  for (const auto& [machine, ranks] : machines.learners) {
    for (NodeId n = machine; n != topo.root(); n = topo.parent(n)) ++machines_below[static_cast<size_t>(n)];
    const double slice_pairs = density * count / static_cast<double>(ranks.size());
    for (int rank : ranks) {
      const NodeId learner = topo.learner_node(rank);
      busiest = std::max(busiest, (m - 1) * slice_pairs * pair_bytes / topo.uplink(learner).bandwidth);
      latency = std::max(latency, 2 * to_root_latency(topo, learner));
    }
  }
  for (NodeId n = 0; n < topo.num_nodes(); ++n) {
    const double below = machines_below[static_cast<size_t>(n)];
    if (n == topo.root() || below == 0) continue;
    const double load = below * (m - below) * density * count * pair_bytes;
    busiest = std::max(busiest, load / topo.uplink(n).bandwidth);
  }
  cost.exchange = latency + params.hop_overhead + busiest;
  return cost;
}

std::optional<double> sparse_break_even_density(const Topology& topo, double bytes, double element_bytes,
                                                double dense_seconds, const CostParams& params,
                                                const SparseCostParams& sparse) {
  // T(rho) = fixed + rho * slope above a tiny density (the latency parts do not depend on it).
  const double tiny = 1e-9;
  const double at_tiny = sparse_allreduce_cost(topo, bytes, element_bytes, tiny, params, sparse).total();
  const double at_one = sparse_allreduce_cost(topo, bytes, element_bytes, 1.0, params, sparse).total();
  if (at_tiny >= dense_seconds) return std::nullopt;
  if (at_one <= dense_seconds) return 1.0;
  const double slope = (at_one - at_tiny) / (1.0 - tiny);
  return tiny + (dense_seconds - at_tiny) / slope;
}

}  // namespace flexplan
