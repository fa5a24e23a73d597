// The all-reduce schedule builders. Each returns a schedule over the topology's ranks
// (Collective::AllReduce, min_bytes 0, no max_bytes; build_plan sets the size range). What the
// planner knows about each algorithm beyond its builder is its row in algorithm_table.hpp.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "ir/plan.hpp"
#include "topology/topology.hpp"

namespace flexplan {

struct CostParams;

// Uneven reduce-scatter level by level up the tree, then the mirror all-gather (the paper's
// Fig. 3), with shares by learner counts. Units: the exact common denominator of the portions
// while it fits in 64 bits, else 2^60 with cumulative rounding (see docs/planner.md).
ir::Schedule plan_flexreduce(const Topology&);
// Shares by link bandwidths from an LP over a mix of virtual trees, star reduces level by level
// (bandwidth_shares.hpp, flexreduce_bw.cpp). Pipelined variants overlap the levels.
ir::Schedule plan_flexreduce_bw(const Topology&);
// The same with the shares planned for the cost model's incast loss (CostParams::incast_loss),
// as the planner prices the schedule.
ir::Schedule plan_flexreduce_bw(const Topology&, const CostParams&);
// Shares by link bandwidths, one tree-walking chain per range, all levels in one step
// (chain_bw.hpp).
ir::Schedule plan_chain_bw(const Topology&);
// Ring reduce-scatter + all-gather over all learners in depth-first order of the tree, so the
// ring crosses every uplink once each way (the least a ring can).
ir::Schedule plan_ring(const Topology&);
// Level-by-level ring reduce-scatter/all-gather on a symmetric tree; falls back to the ring
// schedule (still named "blueconnect") when the tree is not symmetric.
ir::Schedule plan_blueconnect(const Topology&);
// Local reduce to one leader per machine, ring all-reduce among the leaders, local broadcast.
ir::Schedule plan_hierarchical(const Topology&);

// Latency-optimized algorithms (recursive_doubling.cpp, rabenseifner.cpp, binomial_tree.cpp,
// rd_leader.cpp): recursive doubling over all learners in depth-first order, in
// ceil(log2 P) rounds for any P; Rabenseifner's recursive halving and doubling; a binomial
// reduce and broadcast; recursive doubling among machine leaders between local star ops.
ir::Schedule plan_recursive_doubling(const Topology&);
ir::Schedule plan_rabenseifner(const Topology&);
ir::Schedule plan_binomial_tree(const Topology&);
ir::Schedule plan_rd_leader(const Topology&);
// The 2D torus for grid-shaped clusters (torus_2d.cpp); the reason it does not suit a tree, or
// empty.
ir::Schedule plan_torus_2d(const Topology&);
std::string torus_2d_unsuitable(const Topology&);

// True when plan_blueconnect would return the ring schedule.
bool blueconnect_falls_back(const Topology&);

// How big a schedule is: ops, and group members summed over ops (what dominates memory and
// pricing time).
struct ScheduleSize {
  uint64_t ops = 0;
  uint64_t group_members = 0;
};
ScheduleSize measured_size(const ir::Schedule&);

// Schedules beyond these are not built (a flat ring over 128k learners has 34 billion ops):
// build_plan leaves them out with a note, predict prices them with their closed form. An op
// costs about 100 bytes of memory while planning (plus 4 per group member) and about 11 bytes
// of plan.bin: the limits keep a schedule under about 1 GB while planning.
inline constexpr uint64_t kMaxScheduleOps = 8'000'000;
inline constexpr uint64_t kMaxScheduleGroupMembers = 64'000'000;
bool schedule_fits_limits(const ScheduleSize&);
// A lower bound of plan_flexreduce_bw's size on a tree whose every level is uniform (one fan-out
// and one uplink bandwidth per depth, learners all at the bottom), from the tree alone; zero
// elsewhere. The builder throws ScheduleBeyondLimits with it before solving its LP.
ScheduleSize flexreduce_bw_uniform_bound(const Topology&);

// Thrown by a builder without a size estimate (flexreduce-bw's: its size follows from its LP)
// once what it has built passes the limits above: on a flat tree of a million learners its star
// ops would hold 10^12 group members, so the planner learns the schedule is too big from the
// builder instead of from the memory it runs out of. `size`: what was built when it stopped, or
// a lower bound of the whole that passes the limits already.
struct ScheduleBeyondLimits : std::length_error {
  ScheduleBeyondLimits(const std::string& algorithm, ScheduleSize built);
  ScheduleSize size;
};

// Pipelined variants are priced from their base schedule's windows (pipeline.hpp); the work of
// pricing one algorithm's variants (PipelinePricer::work: chain hops walked, link loads added)
// stays under this (about a second), and under kPipelineWorkPerBase times the work of pricing
// the base's steps once (plus kPipelineWorkFloor), so that the time spent on pipelines grows
// with the tree as the rest of planning does: a base of many steps (hierarchical's leader ring
// on 190 machines) has hundreds of sliding windows per slice count. Variants beyond it are
// left out with a note.
inline constexpr uint64_t kPipelinePricingBudget = 16'000'000;
inline constexpr uint64_t kPipelineWorkPerBase = 16;
inline constexpr uint64_t kPipelineWorkFloor = 100'000;
// A pipeline of S slices is held compact (its base and S) while planning and in plan.bin; the
// largest it may be is plan.bin's (ir/pipeline_form.hpp: kMaxExpandedOps and the rest), so that
// every plan written loads.

}  // namespace flexplan
