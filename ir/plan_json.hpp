// The JSON form of a plan (`flexplan inspect --format json`); its shape is stable and
// documented in docs/ir.md. Neither function verifies the plan.
#pragma once

#include <nlohmann/json.hpp>

#include "ir/errors.hpp"
#include "ir/plan.hpp"

namespace flexplan::ir {

nlohmann::json plan_to_json(const Plan& plan);

// Throws PlanFormatError naming the JSON location ("schedules[0].steps[2].ops[1].root").
Plan plan_from_json(const nlohmann::json& json);

}  // namespace flexplan::ir
