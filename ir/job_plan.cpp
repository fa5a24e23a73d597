// load_job_plan and check_job_plan: a rank's share of verifying a plan at job start.
#include "ir/job_plan.hpp"

#include "ir/file_bytes.hpp"
#include "ir/plan_binary.hpp"
#include "ir/verify.hpp"

namespace flexplan::ir {

Plan load_job_plan(const std::string& path, int32_t job_size, int32_t rank) {
  Plan plan = decode_plan_unverified(detail::read_file_bytes(path), path);
  check_job_plan(plan, job_size, rank);
  return plan;
}

void check_job_plan(const Plan& plan, int32_t job_size, int32_t rank) {
  if (plan.world_size != job_size) return;
  verify_plan_slice(plan, rank, job_size);
}

}  // namespace flexplan::ir
