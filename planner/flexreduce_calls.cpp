// Reduce calls per learner of a FlexReduce schedule, and the paper's bound on them (Eq. 12).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include <fmt/core.h>

#include "planner/flexreduce.hpp"
#include "ir/pipeline_form.hpp"

namespace flexplan {
namespace {

// log2 of the product of degrees over the ancestors of `n` from its parent up to and including
// `top` (which must be an ancestor). Logs keep deep trees from overflowing.
double log2_degrees_up_to(const Topology& topo, NodeId n, NodeId top) {
  double sum = 0;
  for (NodeId a = topo.parent(n);; a = topo.parent(a)) {
    if (a < 0) throw std::invalid_argument("eq12_bound: branch is not an ancestor");
    sum += std::log2(static_cast<double>(topo.degree(a)));
    if (a == top) return sum;
  }
}

// log2(1 / smallest current range) among the learners under each child of `branch`: the
// largest degree product strictly below the branch (a learner child holds the whole vector).
std::vector<double> log_smallest_ranges(const Topology& topo, NodeId branch) {
  std::vector<double> smallest;
  for (NodeId child : topo.children(branch)) {
    double log_smallest = 0;
    for (int u : topo.learners_under(child)) {
      const NodeId un = topo.learner_node(u);
      if (un != child)
        log_smallest = std::max(log_smallest, log2_degrees_up_to(topo, un, child));
    }
    smallest.push_back(log_smallest);
  }
  return smallest;
}

// `log_new`: log2(1 / the learner's new range) at the branch's step.
int bound_from_logs(double log_new, const std::vector<double>& log_smallest) {
  int bound = 1;
  for (double s : log_smallest) {
    const double ratio = std::exp2(s - log_new);  // new range / smallest current range
    bound += static_cast<int>(std::ceil(ratio * (1 - 1e-12)));  // exact ratios stay put
  }
  return bound;
}

}  // namespace

int eq12_bound(const Topology& topo, int rank, NodeId branch) {
  const double log_new = log2_degrees_up_to(topo, topo.learner_node(rank), branch);
  return bound_from_logs(log_new, log_smallest_ranges(topo, branch));
}

std::vector<int> reduce_calls_rooted(const ir::Schedule& schedule, int32_t world_size,
                                     int32_t level) {
  ir::require_materialized(schedule, "reduce_calls_rooted");
  std::vector<int> calls(world_size, 0);
  for (const auto& step : schedule.steps) {
    if (step.phase != ir::Phase::ReduceScatter || step.level != level) continue;
    for (const auto& op : step.ops)
      if (op.kind == ir::OpKind::Reduce && op.root >= 0 && op.root < world_size) ++calls[op.root];
  }
  return calls;
}

ReduceCallStats reduce_call_stats(const Topology& topo, const ir::Schedule& schedule) {
  const int learners = topo.num_learners();
  ReduceCallStats stats;
  if (learners == 0 || topo.is_learner(topo.root())) return stats;

  const auto rooted = reduce_calls_rooted(schedule, learners, topo.num_levels() - 1);
  stats.top_rooted_max = *std::max_element(rooted.begin(), rooted.end());
  stats.top_rooted_avg =
      static_cast<double>(std::accumulate(rooted.begin(), rooted.end(), int64_t{0})) / learners;

  std::vector<int> taking_part(learners, 0);
  for (const auto& step : schedule.steps) {
    if (step.phase != ir::Phase::ReduceScatter) continue;
    for (const auto& op : step.ops) {
      if (op.kind != ir::OpKind::Reduce) continue;
      for (int32_t member : op.group) ++taking_part[member];
      if (!op.root_in_group()) ++taking_part[op.root];
    }
  }
  stats.taking_part_max = *std::max_element(taking_part.begin(), taking_part.end());
  stats.taking_part_avg =
      static_cast<double>(std::accumulate(taking_part.begin(), taking_part.end(), int64_t{0})) /
      learners;

  // The bound grows with the new range, so the learner with the largest one has the largest.
  double log_largest_new = INFINITY;
  for (int rank = 0; rank < learners; ++rank)
    log_largest_new = std::min(
        log_largest_new, log2_degrees_up_to(topo, topo.learner_node(rank), topo.root()));
  stats.eq12_bound = bound_from_logs(log_largest_new, log_smallest_ranges(topo, topo.root()));
  return stats;
}

}  // namespace flexplan
