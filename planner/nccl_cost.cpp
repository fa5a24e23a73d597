// Pricing of the NCCL lowering (nccl_cost.hpp).
#include "planner/nccl_cost.hpp"

#include <algorithm>
#include <vector>

#include "codegen/nccl_lowering.hpp"
#include "ir/pipeline_form.hpp"

namespace flexplan {

NcclLocalWork nccl_local_work(const ir::Schedule& schedule, int32_t world_size) {
  ir::require_materialized(schedule, "nccl_local_work");
  std::vector<const ir::Schedule*> one{&schedule};
  const codegen::NcclCommTable table = codegen::build_nccl_comm_table(one, world_size);
  const double units = static_cast<double>(schedule.units);
  // Per step, the busiest rank's fill and copy units.
  std::vector<double> fill(schedule.steps.size(), 0), copy(schedule.steps.size(), 0);
  std::vector<bool> used(schedule.steps.size(), false);
  for (int32_t rank = 0; rank < world_size; ++rank) {
    const codegen::NcclRankProgram program = codegen::lower_nccl_rank(schedule, table, rank);
    for (size_t s = 0; s < program.steps.size(); ++s) {
      double f = 0, c = 0;
      for (const codegen::NcclCall& call : program.steps[s].calls) {
        const double range = static_cast<double>(call.unit_end - call.unit_begin) / units;
        if (call.send_identity) f += range;
        if (call.stage_write) c += range;
        used[s] = true;
      }
      fill[s] = std::max(fill[s], f);
      copy[s] = std::max(copy[s], c);
    }
  }
  NcclLocalWork work;
  for (size_t s = 0; s < schedule.steps.size(); ++s) {
    work.identity_fill += fill[s];
    work.staged_copy += copy[s];
    work.groups += used[s] ? 1 : 0;
  }
  return work;
}

double nccl_lowering_overhead(const ir::Schedule& schedule, int32_t world_size, double bytes,
                              const NcclCostParams& params) {
  const NcclLocalWork work = nccl_local_work(schedule, world_size);
  // A copy reads and writes, a fill only writes.
  const double local_bytes = bytes * (work.identity_fill + 2 * work.staged_copy);
  return static_cast<double>(work.groups) * params.group_launch + local_bytes / params.device_bandwidth;
}

double nccl_schedule_time(const Topology& topology, const ir::Schedule& schedule, double bytes,
                          const CostParams& params, const NcclCostParams& nccl) {
  return evaluate_schedule(topology, schedule, params).at(bytes) +
         nccl_lowering_overhead(schedule, topology.num_learners(), bytes, nccl);
}

}  // namespace flexplan
