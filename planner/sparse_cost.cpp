// The sparse all-reduce's cost on a tree (planner/sparse_cost.hpp).
#include "planner/sparse_cost.hpp"

#include "ir/sparse_exchange.hpp"
#include "ir/sparse_layout.hpp"

#include <algorithm>
#include <map>
#include <string>
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

// Step 3: the exchange schedule's sparse steps (ir/sparse_exchange.hpp), one after another.
// A value's density is the expected share of its range it holds pairs for: `density` after the
// selection; a reduce's result holds the union of its members', as if they had selected
// independently (1 - prod(1 - d)); a broadcast copies the root's. A step takes its busiest link
// direction's bytes over that link's bandwidth plus its longest transfer's latency and one hop
// overhead.
double exchange_seconds(const Topology& topo, double count, double pair_bytes, double density,
                        const CostParams& params) {
  std::vector<std::string> names;
  names.reserve(static_cast<size_t>(topo.num_learners()));
  for (int rank = 0; rank < topo.num_learners(); ++rank) names.push_back(topo.full_name(topo.learner_node(rank)));
  const ir::SparseLayout layout = ir::sparse_layout(names);
  const ir::SparseExchange exchange = ir::sparse_exchange(layout);
  const size_t units = exchange.schedule.units;
  std::vector<double> elements(units);
  for (size_t u = 0; u < units; ++u) {
    const auto& a = exchange.bounds[u];
    const auto& b = exchange.bounds[u + 1];
    elements[u] = count * (static_cast<double>(b.num) / static_cast<double>(b.den) -
                           static_cast<double>(a.num) / static_cast<double>(a.den));
  }
  // Densities by (rank, unit); only a rank's own slice is ever read.
  std::vector<double> held(static_cast<size_t>(topo.num_learners()) * units, density);
  auto at = [&](int32_t rank, size_t u) -> double& { return held[static_cast<size_t>(rank) * units + u]; };

  double total = 0;
  std::vector<double> up(static_cast<size_t>(topo.num_nodes())), down(up.size());
  std::vector<std::pair<size_t, double>> updates;  // (index into held, new density), after the step
  for (size_t s = exchange.first_sparse; s < exchange.end_sparse; ++s) {
    std::fill(up.begin(), up.end(), 0.0);
    std::fill(down.begin(), down.end(), 0.0);
    updates.clear();
    double latency = 0;
    auto transfer = [&](int32_t from, int32_t to, const ir::Op& op) {
      double bytes = 0;
      for (uint64_t u = op.begin; u < op.end; ++u) bytes += at(from, u) * elements[u] * pair_bytes;
      const Topology::Route route = topo.route(from, to);
      for (NodeId n : route.up) up[static_cast<size_t>(n)] += bytes;
      for (NodeId n : route.down) down[static_cast<size_t>(n)] += bytes;
      latency = std::max(latency, topo.path_latency(from, to));
    };
    for (const ir::Op& op : exchange.schedule.steps[s].ops) {
      for (int32_t member : op.group) {
        if (member == op.root) continue;
        if (op.kind == ir::OpKind::Reduce) {
          transfer(member, op.root, op);
        } else {
          transfer(op.root, member, op);
        }
      }
      for (uint64_t u = op.begin; u < op.end; ++u) {
        if (op.kind == ir::OpKind::Reduce) {
          double none = 1;
          for (int32_t member : op.group) none *= 1 - at(member, u);
          updates.push_back({static_cast<size_t>(op.root) * units + u, 1 - none});
        } else {
          for (int32_t member : op.group) updates.push_back({static_cast<size_t>(member) * units + u, at(op.root, u)});
        }
      }
    }
    for (const auto& [index, value] : updates) held[index] = value;
    double busiest = 0;
    for (NodeId n = 0; n < topo.num_nodes(); ++n) {
      if (n == topo.root()) continue;
      const double bandwidth = topo.uplink(n).bandwidth;
      busiest = std::max({busiest, up[static_cast<size_t>(n)] / bandwidth, down[static_cast<size_t>(n)] / bandwidth});
    }
    total += latency + params.hop_overhead + busiest;
  }
  return total;
}

}  // namespace

SparseCost sparse_allreduce_cost(const Topology& topo, double bytes, double element_bytes,
                                 double density, const CostParams& params,
                                 const SparseCostParams& sparse) {
  SparseCost cost;
  const Machines machines = machines_of(topo);
  const double count = bytes / element_bytes;
  const double pair_bytes = sparse.index_bytes + element_bytes;

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

  cost.exchange = exchange_seconds(topo, count, pair_bytes, density, params);
  return cost;
}

std::optional<double> sparse_break_even_density(const Topology& topo, double bytes, double element_bytes,
                                                double dense_seconds, const CostParams& params,
                                                const SparseCostParams& sparse) {
  // The time grows with the density (more pairs in every transfer), not linearly once merged
  // pairs overlap: bisect.
  auto seconds = [&](double rho) { return sparse_allreduce_cost(topo, bytes, element_bytes, rho, params, sparse).total(); };
  double low = 1e-9, high = 1.0;
  if (seconds(low) >= dense_seconds) return std::nullopt;
  if (seconds(high) <= dense_seconds) return 1.0;
  for (int i = 0; i < 60 && high - low > low * 1e-12; ++i) {
    const double mid = 0.5 * (low + high);
    (seconds(mid) <= dense_seconds ? low : high) = mid;
  }
  return low;
}

}  // namespace flexplan
