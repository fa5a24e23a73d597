// load_job_plan and check_job_plan: a rank's share of checking a plan at job start.
#include "ir/job_plan.hpp"

#include "ir/plan_binary.hpp"
#include "ir/plan_sections.hpp"
#include "ir/plan_slice.hpp"
#include "ir/verify.hpp"

namespace flexplan::ir {

FingerprintedPlan load_job_plan(const std::string& path, int32_t job_size, int32_t rank) {
  const std::vector<uint8_t> bytes = read_plan_bytes(path);
  if (verified_when_written(bytes, path)) {
    // This rank's part first, so that a fault in it is reported naming the rank; then the whole
    // plan, which the engine holds, with every checksum but without the other ranks' entries
    // (each rank checks its own). A plan for another world size is checked no further: the
    // runtime's agreement refuses it, naming both sizes.
    if (detail::parse_header_v7(bytes, path, bytes.size()).world_size == job_size)
      (void)read_rank_slice(bytes, path, rank);
    return decode_job_plan(bytes, path);
  }
  // Format 6, or a plan no one verified as a whole when it was written (encode_plan alone):
  // each rank verifies its share of the symbolic execution.
  FingerprintedPlan loaded = decode_fingerprinted_plan(bytes, path);
  check_job_plan(loaded.plan, job_size, rank);
  return loaded;
}

void check_job_plan(const Plan& plan, int32_t job_size, int32_t rank) {
  if (plan.world_size != job_size) return;
  verify_plan_slice(plan, rank, job_size);
}

}  // namespace flexplan::ir
