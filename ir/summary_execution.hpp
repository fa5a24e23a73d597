// Symbolic execution of an allreduce schedule over contribution summaries (internal to the IR
// library; verify.cpp drives it), on a window of units, in memory bounded by the schedule's size.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ir/plan.hpp"

namespace flexplan::ir::detail {

// What the summary execution found wrong. A write conflict is exact and fully described; a
// final value that is not every contribution once is re-run exactly at `unit` to name its cause.
struct SummaryFault {
  enum class Kind { WriteConflict, Incomplete };
  Kind kind;
  std::string message;  // complete for a conflict; a fallback description otherwise
  uint64_t unit = 0;    // a unit where the fault shows
  int32_t rank = -1;    // the rank written twice, or whose final value is wrong
  uint64_t range_begin = 0, range_end = 0;  // Incomplete: that rank's wrong range
};

// Runs the schedule (which must pass check_structure) on units [low, high) and returns the
// first fault found there, if any. Units are independent, so running disjoint windows that
// cover [0, units) checks exactly what one run over all of it would.
//
// Memory: the state is held for at most `segment_budget` segments at a time (0: a default
// proportional to the schedule's size, at least 2^20); a window whose state would exceed it is
// split into smaller windows, down to single units if need be, where the state is one segment
// per rank.
std::optional<SummaryFault> execute_summaries(const Schedule& schedule, int32_t world_size,
                                              uint64_t low, uint64_t high,
                                              size_t segment_budget = 0);

}  // namespace flexplan::ir::detail
