// Exact replay of an allreduce schedule on a single unit with real contribution sets (internal
// to the IR library). The summary execution finds that something is wrong and where; this
// names the precise step, op and rank where a contribution was counted twice or lost, and
// whose contributions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ir/plan.hpp"

namespace flexplan::ir::detail {

// Why `unit` is computed wrongly: the first reduce that would hold a contribution twice; else,
// for the first rank lacking contributions after the last step (focus_rank checked first), the
// write that discarded the last copy of the first contribution it lacks, or, when no write did,
// the rank's own state. `focus_range` names the range the caller saw wrong at focus_rank
// ("[4,8)"). Nullopt if the unit is computed correctly.
std::optional<std::string> replay_unit(const Schedule& schedule, int32_t world_size, uint64_t unit,
                                       int32_t focus_rank, const std::string& focus_range);

}  // namespace flexplan::ir::detail
