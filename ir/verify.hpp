// The verifier: proves by symbolic execution that a schedule computes its collective. Every
// plan written and every plan loaded goes through verify_plan.
//
// Method (docs/ir.md has the details): per rank, an interval map over [0, units) whose segments
// summarize the multiset of contributions held there as (count, two 64-bit sums of per-rank
// random hashes). A reduce's result is the sum of its members' summaries. A count above the
// world size is double counting; at the end every segment must hold all contributions once.
// Any failure is re-run exactly for one offending unit with real contribution sets, so the
// error names the precise step, op, rank, range and the contributions at fault.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "ir/errors.hpp"
#include "ir/plan.hpp"

namespace flexplan::ir {

// Cheap structural checks, no execution: world_size >= 1, units > 0, byte range non-empty,
// begin < end <= units, root and members in [0, world_size), groups non-empty without
// duplicate ranks. Throws VerifyError naming the step, op and field.
void check_structure(const Schedule& schedule, int32_t world_size);

// The checks check_structure makes of the schedule's own fields (world size, units, byte range,
// contract: root and shards), and of one op: op `index` of step `step` of a schedule of `units`
// units (for a compact pipeline, its base's). Errors start with `label`. For readers that see a
// schedule's fields and some of its ops only (ir/plan_slice.hpp).
void check_schedule_fields_only(const Schedule& schedule, int32_t world_size, const std::string& label);
void check_op_structure(const Op& op, uint64_t units, int32_t world_size, const std::string& label, size_t step,
                        size_t index);

// check_structure, then symbolic execution. Throws VerifyError; only allreduce schedules are
// supported so far (other collectives get a "not supported yet" error).
void verify_schedule(const Schedule& schedule, int32_t world_size);
// The same, with errors starting "<label>: " instead of "schedule <algorithm>: ".
void verify_schedule(const Schedule& schedule, int32_t world_size, const std::string& label);

// The plan's own fields: world_size >= 1; rank_names empty or one per rank; topology_hash
// empty or 16 lowercase hex digits; no two schedules of one collective serving the same
// message size. Throws VerifyError.
void check_plan_fields(const Plan& plan);

// Schedules already verified in this process, for verify_plan to take as verified instead of
// executing them again: the planner verifies a collective's schedules on the thread that
// planned them while other races still run (a core would idle otherwise), and the writer
// verifies the rest. A schedule counts only where it equals one verified here (every field and
// every step: steps shared in memory compare at once, others op by op) at the same world size.
// Safe to use from several threads.
class VerifiedSchedules {
 public:
  // Verifies the schedule and keeps it; false (nothing kept) where it does not verify or the
  // verifier throws anything else, so that verify_plan reports the fault in the plan's words.
  bool verify_and_keep(const Schedule& schedule, int32_t world_size);
  bool holds(const Schedule& schedule, int32_t world_size) const;

 private:
  mutable std::mutex lock_;
  std::vector<std::pair<Schedule, int32_t>> kept_;
};

// check_plan_fields, then verify_schedule on every schedule; errors start with the schedule's
// label, schedule_label(plan, i). A schedule holding the same collective, units and steps as an
// earlier one (pipelines of one base, held compact) has only its own fields checked again. A compact pipeline
// is verified as its base; a fault is explained on its expansion when that has at most
// kMaxExplainedExpansionOps ops (pipeline_form.hpp), else on the base.
// With `already`, the schedules it holds are taken as verified (their fields are checked again).
void verify_plan(const Plan& plan, const VerifiedSchedules* already = nullptr);
std::string schedule_label(const Plan& plan, size_t index);  // "schedule 1 (ring)"

// Slice `slice` of `slices` of a schedule's units: [floor(slice * U / slices),
// floor((slice + 1) * U / slices)). The slices of 0 .. slices-1 tile [0, U).
UnitRange unit_slice(uint64_t units, int32_t slice, int32_t slices);

// Which slice of schedule `index` (of `schedules`) the part `part` of `slices` checks: the parts
// are rotated by index * slices / schedules, a permutation per schedule. Schedules with fewer
// units than slices (the latency algorithms' one or two units) put their whole execution in
// the last slices; the rotation gives those of different schedules to different parts instead
// of all to the last rank of a job.
int32_t schedule_slice(size_t index, size_t schedules, int32_t part, int32_t slices);

// One slice of verify_plan, for verifying a plan in parts (each rank of a job one part):
// check_plan_fields; check_structure of the slice's share of each schedule's ops (its
// unit_slice of the op count, counting through the steps in order); then the symbolic
// execution of each schedule's unit_slice of the units, after checking that the ops it reads
// name only ranks of the world. Schedule i's slice is schedule_slice(i, schedules, slice,
// slices). Units are independent, so the slices 0 .. slices-1 together
// check exactly what verify_plan checks (a rank that no op writes is then reported by its final
// state rather than named up front). Every slice skips the same repeated schedules as
// verify_plan does.
void verify_plan_slice(const Plan& plan, int32_t slice, int32_t slices);

}  // namespace flexplan::ir
