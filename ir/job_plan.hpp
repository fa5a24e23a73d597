// What one rank of a job loads and checks at job start (docs/ir.md, "Loading at job start"):
// the plan file's format in full, the plan's fields and every op's structure in full, and the
// symbolic execution of its own slice of every schedule's units. The slices of all ranks tile
// the units, so a job whose ranks all pass, and agree that they hold the same plan, runs a plan
// verified as a whole, while each rank does about 1/P of the execution.
#pragma once

#include <cstdint>
#include <string>

#include "ir/plan.hpp"
#include "ir/plan_binary.hpp"

namespace flexplan::ir {

// Reads and decodes plan.bin (PlanFormatError when malformed), then check_job_plan. The
// fingerprint comes from the decoding pass (plan_binary.hpp), for the ranks to compare.
FingerprintedPlan load_job_plan(const std::string& path, int32_t job_size, int32_t rank);

// verify_plan_slice(plan, rank, job_size) when the plan's world size is the job's; throws
// VerifyError when the slice is wrong. When the world sizes differ nothing is verified (the plan
// cannot run, and a hostile world size should cost nothing): the caller must then refuse the
// plan, as the runtime's agreement across ranks does, naming both sizes.
void check_job_plan(const Plan& plan, int32_t job_size, int32_t rank);

}  // namespace flexplan::ir
