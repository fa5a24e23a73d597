// Exact replay of an allreduce schedule on a single unit (internal to the IR library). The
// summary execution finds that a rank ends wrong on some unit; this names the precise cause:
// the op where a contribution was first counted twice, or the write that discarded the last
// copy of one, or the rank's own state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ir/plan.hpp"

namespace flexplan::ir::detail {

// Why `focus_rank` ends with something other than every contribution once on `unit`, which the
// caller saw wrong over `focus_range` ("[4,8)"). Nullopt if it ends right there after all.
//
// Memory and time are linear in the schedule's size and the world size, which the caller has
// already bounded by the schedule's size: values are not held as sets but as a graph whose
// nodes are the reduces touching the unit, with an edge to each member's value; how often a
// value holds a contribution is the number of paths from its node to that contribution.
std::optional<std::string> replay_unit(const Schedule& schedule, int32_t world_size, uint64_t unit,
                                       int32_t focus_rank, const std::string& focus_range);

}  // namespace flexplan::ir::detail
