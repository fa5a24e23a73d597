// Loading a plan file in either form: plan.bin, or the text form when the file does not start
// with the binary magic. Used by the inspection and verification commands.
#pragma once

#include <string>

#include "ir/plan.hpp"

namespace flexplan::ir {

enum class LoadCheck { Verify, FormatOnly };

// Throws PlanFormatError for an unreadable or malformed file, VerifyError (with Verify) for a
// plan that does not compute its collective.
Plan load_plan_file(const std::string& path, LoadCheck check = LoadCheck::Verify);

}  // namespace flexplan::ir
