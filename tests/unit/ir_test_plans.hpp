// Hand-built schedules for the IR tests and the verifier benchmark: textbook ring, binary tree
// and hierarchical all-reduce, written out op by op independently of the planner.
#pragma once

#include <cstdint>
#include <numeric>
#include <vector>

#include "ir/plan.hpp"

namespace flexplan::ir::testing {

// Ring over ranks `ring` (P of them) with one unit per rank: P-1 reduce-scatter steps in which
// ring[i] passes chunk (i - s) mod P to ring[i+1], then P-1 all-gather steps passing on the
// completed chunks.
inline std::vector<Step> ring_steps(const std::vector<int32_t>& ring, int32_t level = 0) {
  const int64_t p = static_cast<int64_t>(ring.size());
  std::vector<Step> steps;
  auto mod = [p](int64_t x) { return static_cast<uint64_t>(((x % p) + p) % p); };
  for (int64_t s = 0; s + 1 < p; ++s) {
    Step step{Phase::ReduceScatter, level, {}};
    for (int64_t i = 0; i < p; ++i) {
      const uint64_t chunk = mod(i - s);
      const int32_t next = ring[mod(i + 1)];
      step.ops.push_back(Op{OpKind::Reduce, chunk, chunk + 1, next, {ring[i], next}});
    }
    steps.push_back(std::move(step));
  }
  for (int64_t s = 0; s + 1 < p; ++s) {
    Step step{Phase::AllGather, level, {}};
    for (int64_t i = 0; i < p; ++i) {
      const uint64_t chunk = mod(i + 1 - s);
      step.ops.push_back(
          Op{OpKind::Broadcast, chunk, chunk + 1, ring[i], {ring[i], ring[mod(i + 1)]}});
    }
    steps.push_back(std::move(step));
  }
  return steps;
}

inline std::vector<int32_t> iota_ranks(int32_t count, int32_t first = 0) {
  std::vector<int32_t> ranks(static_cast<size_t>(count));
  std::iota(ranks.begin(), ranks.end(), first);
  return ranks;
}

inline Schedule ring_schedule(int32_t world_size) {
  Schedule schedule;
  schedule.algorithm = "ring";
  schedule.units = static_cast<uint64_t>(world_size);
  schedule.steps = ring_steps(iota_ranks(world_size));
  return schedule;
}

// Binary tree: reduce to rank 0 over log2(P) steps on the whole buffer, then broadcast back.
inline Schedule tree_schedule(int32_t world_size, uint64_t units = 4) {
  Schedule schedule;
  schedule.algorithm = "tree";
  schedule.units = units;
  std::vector<Step> down;
  for (int32_t distance = 1; distance < world_size; distance *= 2) {
    Step up{Phase::Reduce, 0, {}};
    Step back{Phase::Broadcast, 0, {}};
    for (int32_t root = 0; root + distance < world_size; root += 2 * distance) {
      up.ops.push_back(Op{OpKind::Reduce, 0, units, root, {root, root + distance}});
      back.ops.push_back(Op{OpKind::Broadcast, 0, units, root, {root, root + distance}});
    }
    schedule.steps.push_back(std::move(up));
    down.insert(down.begin(), std::move(back));
  }
  for (Step& step : down) schedule.steps.push_back(std::move(step));
  return schedule;
}

// Hierarchical: each group of `group_size` consecutive ranks reduces into its first rank, the
// leaders run a ring over `world_size / group_size` units, each leader broadcasts to its group.
inline Schedule hierarchical_schedule(int32_t world_size, int32_t group_size) {
  const int32_t leaders = (world_size + group_size - 1) / group_size;
  Schedule schedule;
  schedule.algorithm = "hierarchical";
  schedule.units = static_cast<uint64_t>(leaders);
  Step local_reduce{Phase::Reduce, 0, {}}, local_broadcast{Phase::Broadcast, 0, {}};
  std::vector<int32_t> leader_ranks;
  for (int32_t first = 0; first < world_size; first += group_size) {
    std::vector<int32_t> group = iota_ranks(std::min(group_size, world_size - first), first);
    leader_ranks.push_back(first);
    if (group.size() < 2) continue;
    local_reduce.ops.push_back(Op{OpKind::Reduce, 0, schedule.units, first, group});
    local_broadcast.ops.push_back(Op{OpKind::Broadcast, 0, schedule.units, first, group});
  }
  schedule.steps.push_back(std::move(local_reduce));
  for (Step& step : ring_steps(leader_ranks, 1)) schedule.steps.push_back(std::move(step));
  schedule.steps.push_back(std::move(local_broadcast));
  return schedule;
}

inline Plan plan_of(std::vector<Schedule> schedules, int32_t world_size) {
  Plan plan;
  plan.world_size = world_size;
  plan.topology_name = "test-cluster";
  plan.topology_hash = "0123456789abcdef";
  for (int32_t rank = 0; rank < world_size; ++rank) {
    plan.rank_names.push_back("switch/m" + std::to_string(rank / 4) + "/gpu" +
                              std::to_string(rank % 4));
  }
  plan.schedules = std::move(schedules);
  return plan;
}

// A small plan with two size ranges, as the planner writes them.
inline Plan two_range_plan(int32_t world_size) {
  Schedule ring = ring_schedule(world_size);
  ring.max_bytes = 32768;
  Schedule tree = tree_schedule(world_size);
  tree.min_bytes = 32768;
  return plan_of({ring, tree}, world_size);
}

}  // namespace flexplan::ir::testing
