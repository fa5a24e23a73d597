// The NCCL lowering: a verified schedule and a rank become the NCCL calls that rank issues (the
// program the GPU backend replays), plus the table of sub-communicators every rank splits once
// at plan load, and a check that the issue order is the same on every rank (so deadlock-free).
//
// - Every distinct member set of the plan's ops (the group, plus the root where the root is
//   outside it) is one sub-communicator. Its sub-ranks follow plan rank order (split key =
//   plan rank). Disjoint sets share one ncclCommSplit call: each split colors the ranks of the
//   sets it creates and passes NCCL_SPLIT_NOCOLOR elsewhere, so a plan needs as many split calls
//   as its busiest rank has sets, not as many as it has sets.
// - Each schedule step becomes one ncclGroupStart/End block holding the step's ncclReduce and
//   ncclBroadcast calls in op order. Unit ranges become element offsets and counts at run time
//   (ir::unit_to_element), so uneven shares need nothing special.
// - A reduce whose root is outside its group (the root receives without contributing) is an
//   ncclReduce over group + root in which the root sends the reduction's identity (0 for sum,
//   1 for prod, the type's largest/smallest value for min/max): one device fill of the range
//   on the root, and the result is exact because x op identity == x. The cost model prices the
//   fill (planner/nccl_cost.hpp).
// - The IR's step semantics (every op reads the buffer as of the step's start) hold because a
//   call whose written range overlaps another call's range on this rank in the same step
//   writes into scratch, copied into place after the group ends.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/plan.hpp"

namespace flexplan::codegen {

// One sub-communicator: its members (plan ranks, ascending; sub-rank = index) and the split
// call that creates it with `color`.
struct NcclGroup {
  std::vector<int32_t> members;
  uint32_t split = 0;
  int32_t color = 0;
  int32_t sub_rank(int32_t rank) const;  // -1 if not a member
  friend bool operator==(const NcclGroup&, const NcclGroup&) = default;
};

struct NcclCommTable {
  int32_t world_size = 0;
  uint32_t splits = 0;              // ncclCommSplit calls every rank makes, in order
  std::vector<NcclGroup> groups;    // index = communicator id used by NcclCall::comm
  // The color rank `rank` passes to split call `split`; NCCL_SPLIT_NOCOLOR (-1) where it joins
  // none of that split's groups.
  int32_t color(uint32_t split, int32_t rank) const;
  // The group created by `split` for `rank`, or -1.
  int32_t group_of(uint32_t split, int32_t rank) const;
  // Looks a member set up; -1 if the table has none.
  int32_t find(const std::vector<int32_t>& sorted_members) const;
  friend bool operator==(const NcclCommTable&, const NcclCommTable&) = default;
};

// The communicators of every collective-reducing op of every schedule of the plan (ops whose
// member set has a single rank move nothing and get none).
NcclCommTable build_nccl_comm_table(const ir::Plan& plan);
NcclCommTable build_nccl_comm_table(const std::vector<const ir::Schedule*>& schedules,
                                    int32_t world_size);

enum class NcclCallKind : uint8_t { Reduce = 0, Broadcast = 1 };

// One NCCL call of one rank. Element offsets/counts follow from the unit range at run time.
struct NcclCall {
  NcclCallKind kind = NcclCallKind::Reduce;
  uint32_t op_index = 0;      // in the step
  int32_t comm = -1;          // NcclCommTable::groups index
  int32_t root = 0;           // sub-rank of the op's root in that communicator
  uint64_t unit_begin = 0, unit_end = 0;
  bool is_root = false;
  bool send_identity = false;  // reduce root outside the group: contributes the identity
  bool stage_write = false;    // write into scratch, copy into place after the group
  friend bool operator==(const NcclCall&, const NcclCall&) = default;
};

struct NcclStep {
  std::vector<NcclCall> calls;  // one ncclGroupStart/End block, in this order
  friend bool operator==(const NcclStep&, const NcclStep&) = default;
};

struct NcclRankProgram {
  int32_t rank = 0;
  std::vector<NcclStep> steps;  // one per schedule step (possibly empty)
  friend bool operator==(const NcclRankProgram&, const NcclRankProgram&) = default;
};

// The lowering pass: rank `rank`'s NCCL calls for a verified schedule. Throws
// std::invalid_argument if the table lacks a communicator the schedule needs.
NcclRankProgram lower_nccl_rank(const ir::Schedule& schedule, const NcclCommTable& table,
                                int32_t rank);

// Proves that the per-rank programs issue in one global order: on every communicator, every
// member issues the same calls (kind, root, range) in the same order and each call in the same
// step, and every rank's steps run in increasing order. Then ordering all calls by step is a
// single order consistent with every rank's issue order, and since a step's calls are one
// group (progressing together), step s on every rank waits only for step s on its peers, which
// they reach after their earlier steps finished: no cycle, no deadlock. Returns "" or what
// differs (the communicator, its members, the position, both ranks' calls).
std::string check_nccl_issue_order(const std::vector<NcclRankProgram>& programs,
                                   const NcclCommTable& table);

// For messages: "ncclReduce root 2 units [0,10) in comm 3".
std::string describe(const NcclCall& call);

}  // namespace flexplan::codegen
