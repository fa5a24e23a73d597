// What one rank of a job loads and checks at job start (docs/ir.md, "Loading at job start").
// A format 7 file whose writer verified the plan as a whole (write_plan_file sets a flag for
// it): this rank's part alone (ir/plan_slice.hpp: the checksums of what it reads, the
// fingerprint, the structure of its blocks' ops, its ops against its entry), then the whole
// plan, which the runtime holds, with every checksum. Any other file (format 6, or a plan
// encoded without verifying it): the file's format in full, the plan's fields and its slice of
// every op's structure, and the symbolic execution of its own slice of every schedule's units,
// as before format 7. In both, the slices of all ranks tile what is checked, so a job whose
// ranks all pass, and agree that they hold the same plan, runs a plan checked as a whole.
#pragma once

#include <cstdint>
#include <string>

#include "ir/plan.hpp"
#include "ir/plan_binary.hpp"

namespace flexplan::ir {

// Reads and decodes plan.bin (PlanFormatError when malformed) and checks this rank's part as
// above (VerifyError for a wrong slice). The fingerprint is the file's (plan_binary.hpp), for
// the ranks to compare.
FingerprintedPlan load_job_plan(const std::string& path, int32_t job_size, int32_t rank);

// verify_plan_slice(plan, rank, job_size) when the plan's world size is the job's; throws
// VerifyError when the slice is wrong. When the world sizes differ nothing is verified (the plan
// cannot run, and a hostile world size should cost nothing): the caller must then refuse the
// plan, as the runtime's agreement across ranks does, naming both sizes.
void check_job_plan(const Plan& plan, int32_t job_size, int32_t rank);

}  // namespace flexplan::ir
