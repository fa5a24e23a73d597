// The readable text form of a plan, one op a line; parse_plan_text reads it back into the same
// plan. Grammar in docs/ir.md. Neither function verifies the plan.
#pragma once

#include <string>
#include <string_view>

#include "ir/errors.hpp"
#include "ir/plan.hpp"

namespace flexplan::ir {

std::string print_plan_text(const Plan& plan);

// Throws PlanFormatError "source:line:column: what".
Plan parse_plan_text(std::string_view text, const std::string& source);

}  // namespace flexplan::ir
