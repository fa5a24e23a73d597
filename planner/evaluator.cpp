// The general evaluator: prices any schedule by routing the hops the runtime will run.
#include <algorithm>
#include <numeric>
#include <stdexcept>

#include <fmt/core.h>

#include "codegen/lowering.hpp"
#include "planner/cost_model.hpp"

namespace flexplan {
namespace {

// Bytes (as a fraction of the message) per link direction within one step, and path
// latencies. The tree is copied into flat arrays: the walks below are the evaluator's hot loop.
//
// A step with few hops walks each path and adds to the links it crosses (only those are reset
// afterwards). A step with many hops records each path as differences instead: +share at the
// source's uplink and -share at the LCA's, likewise downward; one bottom-up pass over the tree
// then turns subtree sums into link loads. Both give the same loads.
class LinkLoads {
 public:
  explicit LinkLoads(const Topology& topo)
      : parent_(topo.num_nodes()),
        depth_(topo.num_nodes()),
        latency_(topo.num_nodes(), 0),
        bandwidth_(topo.num_nodes(), 0),
        up_(topo.num_nodes(), 0),
        down_(topo.num_nodes(), 0),
        is_touched_(topo.num_nodes(), 0) {
    int max_depth = 0;
    for (NodeId n = 0; n < topo.num_nodes(); ++n) {
      parent_[n] = topo.parent(n);
      depth_[n] = topo.depth(n);
      max_depth = std::max(max_depth, depth_[n]);
      if (n == topo.root()) continue;
      latency_[n] = topo.uplink(n).latency;
      bandwidth_[n] = topo.uplink(n).bandwidth;
      if (!(bandwidth_[n] > 0))
        throw std::invalid_argument(
            fmt::format("link above '{}' has no bandwidth", topo.full_name(n)));
    }
    // Deepest first, so that every child comes before its parent.
    bottom_up_.resize(topo.num_nodes());
    std::iota(bottom_up_.begin(), bottom_up_.end(), 0);
    std::stable_sort(bottom_up_.begin(), bottom_up_.end(),
                     [&](NodeId a, NodeId b) { return depth_[a] > depth_[b]; });
    path_work_limit_ = static_cast<size_t>(topo.num_nodes()) / (2 * std::max(max_depth, 1));
  }

  // Call before a step's hops: picks walking or differences for that step.
  void begin_step(size_t hops) { by_differences_ = hops > path_work_limit_; }

  // Adds `share` to every link direction of the path; returns the path latency.
  double add_hop(NodeId a, NodeId b, double share) {
    double latency = 0;
    if (by_differences_) {
      up_[a] += share;
      down_[b] += share;
      while (a != b) {
        if (depth_[a] >= depth_[b]) {
          latency += latency_[a];
          a = parent_[a];
        } else {
          latency += latency_[b];
          b = parent_[b];
        }
      }
      up_[a] -= share;  // a is the LCA: nothing crosses its uplink
      down_[a] -= share;
      return latency;
    }
    while (a != b) {
      if (depth_[a] >= depth_[b]) {
        touch(a);
        up_[a] += share;
        latency += latency_[a];
        a = parent_[a];
      } else {
        touch(b);
        down_[b] += share;
        latency += latency_[b];
        b = parent_[b];
      }
    }
    return latency;
  }

  // Seconds per message byte of the busiest link direction; clears the loads.
  double drain_busiest() {
    double busiest = 0;
    const auto visit = [&](NodeId n) {
      if (parent_[n] >= 0) busiest = std::max(busiest, std::max(up_[n], down_[n]) / bandwidth_[n]);
      up_[n] = down_[n] = 0;
    };
    if (by_differences_) {
      for (NodeId n : bottom_up_) {
        if (parent_[n] >= 0) {
          up_[parent_[n]] += up_[n];
          down_[parent_[n]] += down_[n];
        }
        visit(n);
      }
      return busiest;
    }
    for (NodeId n : touched_) {
      visit(n);
      is_touched_[n] = 0;
    }
    touched_.clear();
    return busiest;
  }

 private:
  void touch(NodeId n) {
    if (!is_touched_[n]) touched_.push_back(n);
    is_touched_[n] = 1;
  }

  std::vector<NodeId> parent_;
  std::vector<int> depth_;
  std::vector<double> latency_, bandwidth_;  // of each node's uplink
  std::vector<NodeId> bottom_up_;
  size_t path_work_limit_ = 0;
  bool by_differences_ = false;
  std::vector<double> up_, down_;
  std::vector<char> is_touched_;
  std::vector<NodeId> touched_;
};

void check_op(const ir::Schedule& schedule, const ir::Op& op, size_t step, size_t index,
              int learners) {
  const auto bad_rank = [&](int32_t rank) { return rank < 0 || rank >= learners; };
  const bool bad = bad_rank(op.root) || std::any_of(op.group.begin(), op.group.end(), bad_rank);
  if (bad || op.end < op.begin || op.end > schedule.units)
    throw std::invalid_argument(fmt::format(
        "schedule '{}' step {} op {}: ranks must be in [0, {}) and the range [{}, {}) within "
        "[0, {})",
        schedule.algorithm, step, index, learners, op.begin, op.end, schedule.units));
}

}  // namespace

std::vector<LinearCost> evaluate_steps(const Topology& topo, const ir::Schedule& schedule,
                                       const CostParams& params) {
  if (schedule.units == 0)
    throw std::invalid_argument(fmt::format("schedule '{}' has zero units", schedule.algorithm));
  LinkLoads loads(topo);
  std::vector<LinearCost> costs;
  costs.reserve(schedule.steps.size());
  const double units = static_cast<double>(schedule.units);
  for (size_t s = 0; s < schedule.steps.size(); ++s) {
    double slowest_chain = 0;
    const auto& ops = schedule.steps[s].ops;
    size_t hops = 0;
    for (const auto& op : ops) hops += op.group.size();
    loads.begin_step(hops);
    for (size_t i = 0; i < ops.size(); ++i) {
      const auto& op = ops[i];
      check_op(schedule, op, s, i, topo.num_learners());
      const double share = static_cast<double>(op.end - op.begin) / units;
      double chain = 0;
      for (const auto& hop : codegen::lower_op(op)) {
        chain += loads.add_hop(topo.learner_node(hop.src), topo.learner_node(hop.dst), share);
        chain += params.hop_overhead;
      }
      slowest_chain = std::max(slowest_chain, chain);
    }
    costs.push_back({slowest_chain, loads.drain_busiest()});
  }
  return costs;
}

LinearCost evaluate_schedule(const Topology& topo, const ir::Schedule& schedule,
                             const CostParams& params) {
  LinearCost total;
  for (const auto& step : evaluate_steps(topo, schedule, params)) total += step;
  return total;
}

}  // namespace flexplan
