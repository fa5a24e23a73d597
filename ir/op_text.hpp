// Short textual forms shared by the text printer and error messages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>

#include "ir/plan.hpp"

namespace flexplan::ir {

// "reduce [0,6) root 0 group 0 1"; beyond `member_limit` members the group is cut short as
// "group 0 1 2 ... (1250 members)".
std::string format_op(const Op& op, size_t member_limit = std::numeric_limits<size_t>::max());

// "rank 3", "ranks {0, 3, 5}", or "ranks {0, 1, ... } (1200 in all)" past a few.
std::string format_ranks(std::span<const int32_t> ranks);

}  // namespace flexplan::ir
