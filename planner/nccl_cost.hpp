// Prices the NCCL lowering (codegen/nccl_lowering.hpp) of a schedule: the links carry the same
// hops as the point-to-point lowering (evaluate_schedule), and on top of that each step pays one
// group launch, and each rank's device-local work: filling the identity a root outside its
// group contributes, and copying staged writes into place, at device memory bandwidth.
#pragma once

#include "ir/plan.hpp"
#include "planner/cost_model.hpp"
#include "topology/topology.hpp"

namespace flexplan {

struct NcclCostParams {
  double group_launch = 10e-6;        // seconds per ncclGroupStart/End block (kernel launch)
  double device_bandwidth = 1.5e12;   // bytes/s of a device fill or device-to-device copy
};

// Device-local bytes one step costs its busiest rank, per message byte (a root outside its
// group fills its range with the identity; a staged write is copied once).
struct NcclLocalWork {
  double identity_fill = 0;  // per message byte, busiest rank, summed over steps
  double staged_copy = 0;
  uint64_t groups = 0;       // steps with at least one call somewhere
};
NcclLocalWork nccl_local_work(const ir::Schedule&, int32_t world_size);

// The extra seconds of the NCCL lowering over the point-to-point price, for `bytes`.
double nccl_lowering_overhead(const ir::Schedule&, int32_t world_size, double bytes,
                              const NcclCostParams& = {});

// evaluate_schedule(...).at(bytes) + nccl_lowering_overhead(...).
double nccl_schedule_time(const Topology&, const ir::Schedule&, double bytes,
                          const CostParams& = {}, const NcclCostParams& = {});

}  // namespace flexplan
