// What one rank does in each step of a schedule: its place in every op's chain (from
// codegen::lower_op, the hops the cost model prices) and whether its writes must be staged.
// Independent of the message size, so it is built once per (schedule, rank) and reused.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/plan.hpp"

namespace flexplan {

// This rank's part in one op. prev/next are -1 where the chain starts or ends here.
struct Task {
  uint32_t op_index = 0;
  bool reduce = true;    // reduce chain, else broadcast chain
  int32_t prev = -1;     // receive each chunk from this rank
  int32_t next = -1;     // send each chunk to this rank
  bool add_own = false;  // reduce: combine the received chunk with this rank's own data
  uint64_t unit_begin = 0, unit_end = 0;
  // Message numbering for the tags (tag.hpp): this rank's receives in the schedule are numbered
  // 0, 1, ... in (step, op) order; receive_index is this task's number when it receives,
  // next_receive_index the number this op has among `next`'s receives when it sends.
  uint64_t receive_index = 0;
  uint64_t next_receive_index = 0;
  // The range this task writes is read or written by another task of the same step on this
  // rank: land it in scratch and copy it in when the step ends, so that every op reads the
  // buffer as of the step's start (the IR's step semantics).
  bool stage_writes = false;
  // No earlier step wrote the range this task reads: read it straight from the send buffer
  // (out of place, the receive buffer then needs no initial copy of the input).
  bool own_from_send = false;

  bool receives() const { return prev >= 0; }
  bool sends() const { return next >= 0; }
  // Writes its range into the buffer: a reduce's last member, every broadcast receiver.
  bool writes() const { return receives() && (!reduce || !sends()); }
  // Reads its own range as of the step's start.
  bool reads_own() const { return reduce ? (!receives() || add_own) : !receives(); }
};

struct UnitRange {
  uint64_t begin = 0, end = 0;
  friend bool operator==(const UnitRange&, const UnitRange&) = default;
};

struct StepProgram {
  std::vector<Task> tasks;
  // Out of place: parts of ranges this step reads that earlier steps wrote only in part; the
  // unwritten parts are copied from the send to the receive buffer when the step starts.
  std::vector<UnitRange> copy_in;
};

struct RankProgram {
  std::vector<StepProgram> steps;  // one per schedule step, possibly without tasks
  // Out of place: what no step writes on this rank (the input is the result there, as with
  // one rank), copied from the send to the receive buffer at the end.
  std::vector<UnitRange> copy_at_end;
};

RankProgram build_rank_program(const ir::Schedule& schedule, int32_t rank);

}  // namespace flexplan
