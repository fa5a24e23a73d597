// Symbolic execution of an allreduce schedule over contribution summaries (internal to the IR
// library; verify.cpp drives it). Fast enough for plans of 10,000+ ranks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ir/plan.hpp"

namespace flexplan::ir::detail {

// What the summary execution found wrong. A write conflict is exact and fully described; an
// over-count or an incomplete final segment is re-run exactly at `unit` to name its cause.
struct SummaryFault {
  enum class Kind { WriteConflict, OverCount, Incomplete };
  Kind kind;
  std::string message;  // complete for a conflict; a fallback description otherwise
  uint64_t unit = 0;    // a unit where the fault shows
  int32_t rank = -1;    // Incomplete: the rank whose final state is wrong
  uint64_t range_begin = 0, range_end = 0;  // Incomplete: that rank's wrong range
};

// Runs the schedule (which must pass check_structure) and returns the first fault, if any.
std::optional<SummaryFault> execute_summaries(const Schedule& schedule, int32_t world_size);

}  // namespace flexplan::ir::detail
