// Pipelined schedules and their base: expanding a base schedule into `slices` slices one step
// apart, and recognising a schedule that is exactly such an expansion, so that the verifier
// can check the base (1/slices of the work) instead of the whole pipeline.
//
// In the expansion (`expand_pipeline`), step t holds, for every slice j with 0 <= t - j < m
// (m: the base's steps), the ops of base step t - j with their ranges moved up by j * units;
// the expansion has units * slices units. Slices touch disjoint units, so on every unit the
// expansion runs exactly the base's ops in the base's order: it computes what the base
// computes, and every per-op rule of the verifier holds for it when it holds for the base.
#pragma once

#include <cstdint>
#include <optional>

#include "ir/plan.hpp"

namespace flexplan::ir {

// The largest pipeline plan.bin expands when read (the planner's own limits are within them),
// so that a small file cannot claim an unbounded schedule.
inline constexpr uint32_t kMaxPipelineSlices = 1024;
inline constexpr uint64_t kMaxExpandedOps = 8'000'000;
inline constexpr uint64_t kMaxExpandedGroupMembers = 64'000'000;

// Throws std::invalid_argument for zero slices or when units * slices does not fit in 64 bits.
// Named "<base name>@<slices>" when slices > 1.
Schedule expand_pipeline(const Schedule& base, uint32_t slices);

struct PipelineBase {
  Schedule base;
  uint32_t slices = 1;
};

// The base and slice count of a schedule named "<name>@<slices>" that equals
// expand_pipeline(base, slices) op for op; nullopt for any other schedule. Costs one pass over
// the schedule and a copy of 1/slices of it.
std::optional<PipelineBase> pipeline_base(const Schedule&);

}  // namespace flexplan::ir
