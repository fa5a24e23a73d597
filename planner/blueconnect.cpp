// BlueConnect: on a tree that factors evenly (every learner at the same depth, every node at a
// depth with the same fan-out), the learners form a grid with one dimension per level. The
// reduce-scatter runs one dimension at a time from the bottom: at level l, the learners that
// differ only in their level-l coordinate (one in each child of a level-l node, holding the
// same block) ring-reduce-scatter that block. The all-gather mirrors it from the top. On any
// other tree the grid does not exist and BlueConnect falls back to the ring.
#include <vector>

#include "planner/algorithms.hpp"
#include "planner/ring_steps.hpp"

namespace flexplan {
namespace {

// The fan-out of each level, bottom first, or empty when the tree does not factor evenly.
std::vector<uint64_t> level_fan_outs(const Topology& topo) {
  const int learner_depth = topo.depth(topo.learner_node(0));
  for (int rank = 0; rank < topo.num_learners(); ++rank)
    if (topo.depth(topo.learner_node(rank)) != learner_depth) return {};
  std::vector<uint64_t> fan_outs(topo.num_levels(), 0);
  for (NodeId n = 0; n < topo.num_nodes(); ++n) {
    if (topo.is_learner(n)) continue;
    auto& fan_out = fan_outs[topo.level(n)];
    if (fan_out == 0) fan_out = topo.degree(n);
    if (fan_out != static_cast<uint64_t>(topo.degree(n))) return {};
  }
  return fan_outs;
}

class BlueConnectPlanner {
 public:
  BlueConnectPlanner(const Topology& topo, std::vector<uint64_t> fan_outs)
      : fan_outs_(std::move(fan_outs)) {
    const auto order = topo.learners_under(topo.root());
    dfs_order_.assign(order.begin(), order.end());
  }

  ir::Schedule plan() const {
    ir::Schedule schedule;
    schedule.algorithm = "blueconnect";
    schedule.collective = ir::Collective::AllReduce;
    schedule.units = dfs_order_.size();  // the product of the fan-outs: every chunk is exact
    const int levels = static_cast<int>(fan_outs_.size());
    for (int level = 0; level < levels; ++level)
      append_ring_reduce_scatter(schedule.steps.edit(), rings_at(level), level);
    for (int level = levels - 1; level >= 0; --level)
      append_ring_all_gather(schedule.steps.edit(), rings_at(level), level);
    return schedule;
  }

 private:
  // Learner j in depth-first order has coordinates j_l = (j / stride_l) % fan_out_l with
  // stride_l the product of the fan-outs below l. After levels 0..l-1 it owns a block of size
  // P / stride_l that starts at sum_{i<l} j_i * P / (stride_i * fan_out_i).
  std::vector<RingSpec> rings_at(int level) const {
    const uint64_t learners = dfs_order_.size();
    uint64_t stride = 1;
    for (int i = 0; i < level; ++i) stride *= fan_outs_[i];
    const uint64_t fan_out = fan_outs_[level];
    const uint64_t block = learners / stride;
    std::vector<RingSpec> rings;
    for (uint64_t j = 0; j < learners; ++j) {
      if ((j / stride) % fan_out != 0) continue;  // one ring per learner with coordinate 0
      RingSpec ring;
      uint64_t begin = 0, sub_stride = 1;
      for (int i = 0; i < level; ++i) {
        sub_stride *= fan_outs_[i];
        begin += ((j / (sub_stride / fan_outs_[i])) % fan_outs_[i]) * (learners / sub_stride);
      }
      ring.begin = begin;
      ring.end = begin + block;
      for (uint64_t t = 0; t < fan_out; ++t)
        ring.members.push_back(dfs_order_[j + t * stride]);
      rings.push_back(std::move(ring));
    }
    return rings;
  }

  std::vector<uint64_t> fan_outs_;
  std::vector<int32_t> dfs_order_;
};

}  // namespace

bool blueconnect_falls_back(const Topology& topo) { return level_fan_outs(topo).empty(); }

ir::Schedule plan_blueconnect(const Topology& topo) {
  auto fan_outs = level_fan_outs(topo);
  if (fan_outs.empty()) {
    auto schedule = plan_ring(topo);
    schedule.algorithm = "blueconnect";
    return schedule;
  }
  return BlueConnectPlanner(topo, std::move(fan_outs)).plan();
}

}  // namespace flexplan
