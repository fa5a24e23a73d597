// load_job_plan and check_job_plan: a rank's share of verifying a plan at job start.
#include "ir/job_plan.hpp"

#include "ir/plan_binary.hpp"
#include "ir/verify.hpp"

namespace flexplan::ir {

FingerprintedPlan load_job_plan(const std::string& path, int32_t job_size, int32_t rank) {
  FingerprintedPlan loaded = decode_fingerprinted_plan(read_plan_bytes(path), path);
  check_job_plan(loaded.plan, job_size, rank);
  return loaded;
}

void check_job_plan(const Plan& plan, int32_t job_size, int32_t rank) {
  if (plan.world_size != job_size) return;
  verify_plan_slice(plan, rank, job_size);
}

}  // namespace flexplan::ir
