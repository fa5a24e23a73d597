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
// overhead. Built once per topology (the schedule and every transfer's links), priced per size
// and density.
class ExchangeModel {
 public:
  explicit ExchangeModel(const Topology& topo) : topo_(topo) {
    exchange_ = ir::sparse_exchange(ir::sparse_layout(topo.learner_names()));
    const size_t units = exchange_.schedule.units;
    for (size_t u = 0; u < units; ++u) {
      const auto& a = exchange_.bounds[u];
      const auto& b = exchange_.bounds[u + 1];
      share_.push_back(static_cast<double>(b.num) / static_cast<double>(b.den) -
                       static_cast<double>(a.num) / static_cast<double>(a.den));
    }
    for (size_t s = exchange_.first_sparse; s < exchange_.end_sparse; ++s) {
      Step& step = steps_.emplace_back();
      for (const ir::Op& op : exchange_.schedule.steps[s].ops) {
        for (int32_t member : op.group) {
          if (member == op.root) continue;
          const int32_t from = op.kind == ir::OpKind::Reduce ? member : op.root;
          const int32_t to = op.kind == ir::OpKind::Reduce ? op.root : member;
          const Topology::Route route = topo.route(from, to);
          step.transfers.push_back({from, &op, route.up, route.down});
          step.latency = std::max(step.latency, topo.path_latency(from, to));
        }
      }
    }
  }

  double seconds(double count, double pair_bytes, double density, const CostParams& params) const {
    const size_t units = exchange_.schedule.units;
    // Densities by (rank, unit); only a rank's own slice is ever read.
    std::vector<double> held(static_cast<size_t>(topo_.num_learners()) * units, density);
    auto at = [&](int32_t rank, size_t u) { return held[static_cast<size_t>(rank) * units + u]; };
    std::vector<double> up(static_cast<size_t>(topo_.num_nodes())), down(up.size());
    std::vector<std::pair<size_t, double>> updates;  // (index into held, new density), after the step
    double total = 0;
    size_t index = exchange_.first_sparse;
    for (const Step& step : steps_) {
      std::fill(up.begin(), up.end(), 0.0);
      std::fill(down.begin(), down.end(), 0.0);
      for (const Transfer& t : step.transfers) {
        double bytes = 0;
        for (uint64_t u = t.op->begin; u < t.op->end; ++u) bytes += at(t.from, u) * share_[u] * count * pair_bytes;
        for (NodeId n : t.up) up[static_cast<size_t>(n)] += bytes;
        for (NodeId n : t.down) down[static_cast<size_t>(n)] += bytes;
      }
      updates.clear();
      for (const ir::Op& op : exchange_.schedule.steps[index++].ops) {
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
      for (const auto& [i, value] : updates) held[i] = value;
      double busiest = 0;
      for (NodeId n = 0; n < topo_.num_nodes(); ++n) {
        if (n == topo_.root()) continue;
        const double bandwidth = topo_.uplink(n).bandwidth;
        busiest = std::max({busiest, up[static_cast<size_t>(n)] / bandwidth, down[static_cast<size_t>(n)] / bandwidth});
      }
      total += step.latency + params.hop_overhead + busiest;
    }
    return total;
  }

 private:
  struct Transfer {
    int32_t from;
    const ir::Op* op;
    std::vector<NodeId> up, down;  // the links it crosses upward and downward
  };
  struct Step {
    std::vector<Transfer> transfers;
    double latency = 0;  // the longest transfer's
  };
  const Topology& topo_;
  ir::SparseExchange exchange_;
  std::vector<double> share_;  // each unit's share of the vector
  std::vector<Step> steps_;
};

SparseCost cost_with(const ExchangeModel& model, const Topology& topo, double bytes, double element_bytes,
                     double density, const CostParams& params, const SparseCostParams& sparse) {
  SparseCost cost;
  const Machines machines = machines_of(topo);
  const double count = bytes / element_bytes;

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

  cost.exchange = model.seconds(count, sparse.index_bytes + element_bytes, density, params);
  return cost;
}

}  // namespace

SparseCost sparse_allreduce_cost(const Topology& topo, double bytes, double element_bytes,
                                 double density, const CostParams& params,
                                 const SparseCostParams& sparse) {
  return cost_with(ExchangeModel(topo), topo, bytes, element_bytes, density, params, sparse);
}

std::optional<double> sparse_break_even_density(const Topology& topo, double bytes, double element_bytes,
                                                double dense_seconds, const CostParams& params,
                                                const SparseCostParams& sparse) {
  // The time grows with the density (more pairs in every transfer), not linearly once merged
  // pairs overlap: bisect.
  const ExchangeModel model(topo);
  auto seconds = [&](double rho) {
    return cost_with(model, topo, bytes, element_bytes, rho, params, sparse).total();
  };
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
