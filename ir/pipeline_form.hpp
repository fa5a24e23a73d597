// Pipelined schedules and their base: expanding a base schedule into `slices` slices one step
// apart, and recognising a schedule that is exactly such an expansion, so that the verifier
// can check the base (1/slices of the work) instead of the whole pipeline.
//
// In the expansion (`expand_pipeline`), step t holds, for every slice j with 0 <= t - j < m
// (m: the base's steps), the ops of base step t - j with their ranges moved up by j * units;
// the expansion has units * slices units. Slices touch disjoint units, so on every unit the
// expansion runs exactly the base's ops in the base's order: it computes what the base
// computes, and every per-op rule of the verifier holds for it when it holds for the base.
// A pipeline is held either whole (the expansion's steps) or compact (its base's steps and
// Schedule::slices); plan.bin stores and decodes the compact form.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ir/plan.hpp"

namespace flexplan::ir {

// The largest pipeline plan.bin reads, and so the largest the planner writes (one fact for
// both), so that a small file cannot claim an unbounded schedule. A compact pipeline costs the
// decoder, the verifier and the planner its base only, and a rank lowers only its own share of
// the expansion (codegen/rank_program.hpp), so what binds a job is the most ops one rank takes
// part in (kMaxRankExpandedOps). The expansion's own size is bounded by what the runtime can
// number: a rank's receives in a schedule are at most its ops, and the tags number them in 31
// bits (runtime/tag.hpp checks kMaxExpandedOps against that). The whole expansion is built only
// by tools that print or compile a plan (materialize, up to kMaxMaterializedOps), and to
// explain a verifier's fault when it is at most kMaxExplainedExpansionOps.
inline constexpr uint32_t kMaxPipelineSlices = 1024;
inline constexpr uint64_t kMaxExpandedOps = (uint64_t{1} << 31) - 1;
inline constexpr uint64_t kMaxExpandedGroupMembers = uint64_t{1} << 35;
inline constexpr uint64_t kMaxRankExpandedOps = 4'000'000;
inline constexpr uint64_t kMaxExplainedExpansionOps = 8'000'000;
inline constexpr uint64_t kMaxMaterializedOps = 32'000'000;
inline constexpr uint64_t kMaxMaterializedGroupMembers = 256'000'000;

// A base schedule's size as the pipeline limits see it: its ops, its group members, and the
// most ops one rank of [0, world_size) takes part in (in the group or as the root).
struct PipelineFootprint {
  uint64_t ops = 0, group_members = 0, largest_rank_ops = 0;
};
PipelineFootprint pipeline_footprint(const Schedule& base, int32_t world_size);
// Why `slices` slices of a base of this footprint are beyond the limits above; empty when
// they are within them.
std::string pipeline_beyond_limits(const PipelineFootprint&, uint64_t slices);

// Throws std::invalid_argument for zero slices, for a base that is itself compact (slices > 1)
// or when units * slices does not fit in 64 bits. Named "<base name>@<slices>" when slices > 1.
Schedule expand_pipeline(const Schedule& base, uint32_t slices);

// The same pipeline held compact (Schedule::slices): the base's steps as they are, the name
// "<base name>@<slices>". (A base without steps gives the expansion, which has none either.)
// Throws as expand_pipeline does.
Schedule compact_pipeline(Schedule base, uint32_t slices);
// A schedule held whole: a copy of one that already is, the expansion of a compact one (under
// its own name). Throws TooLargeToExpand (errors.hpp) for an expansion of more than
// kMaxMaterializedOps ops or kMaxMaterializedGroupMembers group members (a few GB held whole).
Schedule materialize(const Schedule&);
// Every schedule of the plan held whole (for tools that index a schedule's steps: codegen).
Plan materialize(const Plan&);
// Op `index` of expansion step t: the base op and how far its range moves up (its slice's
// j * units). Throws std::out_of_range when the step has no such op.
struct ExpandedOp {
  const Op* op = nullptr;
  uint64_t offset = 0;
};
ExpandedOp expanded_op(const Schedule&, size_t t, size_t index);
// The ops of the whole schedule: the base's times the slices.
uint64_t expanded_op_count(const Schedule&);
// The units of the whole pipeline: units * slices.
inline uint64_t expanded_units(const Schedule& schedule) { return schedule.units * schedule.slices; }
// Throws std::logic_error naming `where` for a compact schedule: for code that reads a
// schedule's steps as the whole schedule and would otherwise run or price its base alone.
void require_materialized(const Schedule&, std::string_view where);

// The expansion read from its base without building it (what expand_pipeline builds, step by
// step), for code that walks a pipeline once. `slices` >= 1 throughout.
//
// The expansion's step count: m + slices - 1 for a base of m >= 1 steps, 0 for an empty base.
inline size_t expanded_step_count(const Schedule& base, uint32_t slices) {
  return base.steps.empty() ? 0 : base.steps.size() + slices - 1;
}
// The slices that have an op in expansion step t: [first, last], those j with 0 <= t - j < m.
inline size_t first_slice_in_step(const Schedule& base, size_t t) {
  return t + 1 > base.steps.size() ? t + 1 - base.steps.size() : 0;
}
inline size_t last_slice_in_step(uint32_t slices, size_t t) { return std::min<size_t>(t, slices - 1); }
// The base step whose phase and level expansion step t carries: the frontmost slice's step.
inline size_t expanded_step_label(const Schedule& base, size_t t) { return t - first_slice_in_step(base, t); }
// Calls visit(j, base op) for every op of expansion step t, in the expansion's order (slices
// ascending, each in base op order). The expanded op is the base op with its range moved up by
// j * base.units.
template <class Visit>
void for_each_expanded_op(const Schedule& base, uint32_t slices, size_t t, Visit&& visit) {
  const size_t last = last_slice_in_step(slices, t);
  for (size_t j = first_slice_in_step(base, t); j <= last; ++j)
    for (const Op& op : base.steps[t - j].ops) visit(j, op);
}
// The index in expansion step t of slice j's first op (j within the step's slices).
inline size_t expanded_op_offset(const Schedule& base, size_t t, size_t j) {
  size_t offset = 0;
  for (size_t earlier = first_slice_in_step(base, t); earlier < j; ++earlier) offset += base.steps[t - earlier].ops.size();
  return offset;
}

struct PipelineBase {
  Schedule base;
  uint32_t slices = 1;
};

// The base and slice count of a compact pipeline (a copy of its steps), or of a schedule named
// "<name>@<slices>" that equals expand_pipeline(base, slices) op for op; nullopt for any other
// schedule. Costs one pass over the schedule and a copy of 1/slices of it.
std::optional<PipelineBase> pipeline_base(const Schedule&);

}  // namespace flexplan::ir
