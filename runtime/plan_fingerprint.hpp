// A 64-bit fingerprint of a plan's whole content, compared across ranks at creation so that
// ranks which loaded different plans fail together instead of exchanging mismatched messages.
#pragma once

#include <cstdint>

#include "ir/plan.hpp"

namespace flexplan {

uint64_t plan_fingerprint(const ir::Plan& plan);

}  // namespace flexplan
