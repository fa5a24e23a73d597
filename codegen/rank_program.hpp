// The point-to-point lowering, the program the UCX runtime executes: what one rank does in each
// step of a schedule, i.e. its place in every op's chain or star (from lower_op, the hops the
// cost model prices), whether its writes must be staged, and where it reads its own data.
// Independent of the message size, so it is lowered once per (schedule, rank) and reused. Other
// backends get lowerings of their own (the MSCCL export builds on this one).
#pragma once

#include <cstdint>
#include <vector>

#include "codegen/chunking.hpp"
#include "ir/plan.hpp"
#include "ir/plan_slice.hpp"

namespace flexplan::codegen {

// One end of a message: the peer, and what names the message on its receiver (the runtime's
// tags, runtime/tag.hpp). Both ends derive it from the op alone, so a rank can number the
// messages of its own ops without the rest of the schedule (a plan.bin slice holds enough):
struct Link {
  int32_t rank = -1;
  // The op's number in the schedule: ops counted in (step, op) order through every step before
  // (of a compact pipeline, through its expansion's steps). Every receiver receives at most one
  // message per op, but a star reduce's root, which receives one from each source:
  uint64_t message = 0;
  // ... told apart by the source's place among the root's sources (group order, the root left
  // out); 0 for every other message.
  uint32_t source = 0;
  friend bool operator==(const Link&, const Link&) = default;
};

// A task of a rank program: its step and its index among the step's tasks.
struct TaskRef {
  uint32_t step = 0, task = 0;
  friend bool operator==(const TaskRef&, const TaskRef&) = default;
  friend bool operator<(const TaskRef& a, const TaskRef& b) {
    return a.step != b.step ? a.step < b.step : a.task < b.task;
  }
};

// This rank's part in one op. A chain member receives from at most one rank and sends to at
// most one; a star reduce's root receives from every other member, a star broadcast's root
// sends to every other member, and those members exchange with the root alone.
struct Task {
  uint32_t op_index = 0;
  bool reduce = true;    // a reduce, else a broadcast
  bool add_own = false;  // reduce: combine the received data with this rank's own data
  // Reduce with add_own: how many sources' data precede this rank's own in the order of
  // combining (a chain member's own comes after the partial sum it receives; a star root's at
  // its place in the group). Fixed, so that floating-point results repeat exactly.
  uint32_t own_position = 0;
  uint64_t unit_begin = 0, unit_end = 0;
  // Receive each chunk from every source, in this order (a reduce combines them in it).
  std::vector<Link> sources;
  // Send each chunk (a reduce: the combined data; a broadcast: what arrived, or this rank's
  // own at the root) to every destination; the link names the message on its receiver.
  std::vector<Link> destinations;
  // The most chunks a range of this task may be cut into (codegen::chunk_range), a power of two:
  // kMaxChunksPerRange, but in a star reduce, whose root's sources take the high bits of the
  // tag's chunk field, kMaxChunksPerRange / star_source_slots(sources). Both ends of every hop
  // of the op compute the same.
  uint64_t max_chunks = kMaxChunksPerRange;
  // The range this task writes is read or written by another task of the same step on this
  // rank: land it in scratch and copy it in when the step ends, so that every op reads the
  // buffer as of the step's start (the IR's step semantics).
  bool stage_writes = false;
  // No earlier step wrote the range this task reads: read it straight from the send buffer
  // (out of place, the receive buffer then needs no initial copy of the input).
  bool own_from_send = false;
  // Filled by link_tasks (empty before): the tasks of earlier steps on this rank that must
  // finish before this one starts, and the tasks of later steps that wait for this one. A task
  // may start before the rest of the step before it (runtime/operation.hpp, Overlapping steps).
  std::vector<TaskRef> after, wakes;

  bool receives() const { return !sources.empty(); }
  bool sends() const { return !destinations.empty(); }
  // Writes its range into the buffer: a reduce's root, every broadcast receiver.
  bool writes() const { return receives() && (!reduce || !sends()); }
  // Reads its own range as of the step's start.
  bool reads_own() const { return reduce ? (!receives() || add_own) : !receives(); }
  friend bool operator==(const Task&, const Task&) = default;
};

using ir::UnitRange;

struct StepProgram {
  std::vector<Task> tasks;
  // Out of place: parts of ranges this step reads that earlier steps wrote only in part; the
  // unwritten parts are copied from the send to the receive buffer when the step starts.
  std::vector<UnitRange> copy_in;
  friend bool operator==(const StepProgram&, const StepProgram&) = default;
};

struct RankProgram {
  std::vector<StepProgram> steps;  // one per schedule step, possibly without tasks
  // Out of place: what no step writes on this rank (the input is the result there, as with
  // one rank), copied from the send to the receive buffer at the end.
  std::vector<UnitRange> copy_at_end;
  friend bool operator==(const RankProgram&, const RankProgram&) = default;
};

// The dependencies between a rank's tasks of different steps (Task::after and wakes), from the
// hazards on the unit ranges each touches, in the buffer or in the input read in place: a task
// waits for the last task of an earlier step that wrote a unit it reads or writes (read after
// write, write after write), and a writer also for every task that read the unit since
// (write after read; a sender reads until its send completed). What a task touches:
//   reads its range: reads_own() (its own data, combined or sent as is);
//   writes its range: writes() (a reduce's root, a broadcast receiver, which forwards what it wrote).
// Tasks of one step never wait for each other (the IR's step semantics; overlapping writers are
// staged and land when their whole step has finished, so a task that waits for a staged writer
// waits for that step). Steps stay the tags' and the lowering's unit; only the executor's order
// loosens. Run once per (schedule, rank), beside the lowering: about O(T log T) for T tasks.
void link_tasks(RankProgram& program);

// A star reduce of `sources` sources numbers them in this many slots of the tag's chunk field:
// the least power of two that holds them (1 for one source or none). At most kMaxChunksPerRange
// for the ir::kMaxStarSources the verifier allows; throws std::length_error beyond.
uint64_t star_source_slots(uint64_t sources);

// The op numbers (Link::message) of a schedule's expansion: the ops in expansion steps before
// `step` of a pipeline of `slices` slices of a base whose steps hold `base_ops[b]` ops (for a
// schedule held whole, slices = 1: the ops of its steps before `step`). Each expansion step t
// holds base step t - j of every slice j with 0 <= t - j < base steps.
class OpNumbers {
 public:
  OpNumbers(const std::vector<uint64_t>& base_ops, uint32_t slices);
  uint64_t before_step(size_t step) const;
  // The expansion's ops in all (at most kMaxExpandedOps for a plan plan.bin accepts).
  uint64_t total() const;

 private:
  // Base steps' ops before step x, and their sum of step numbers, x = 0 .. base steps.
  std::vector<uint64_t> count_, step_sum_;
  uint32_t slices_;
};

// The lowering pass: rank `rank`'s slice of a schedule. The schedule should be verified
// (ir::verify_schedule); ranks outside [0, world) simply take part in nothing.
RankProgram lower_rank_program(const ir::Schedule& schedule, int32_t rank);
// The same from a rank's part of plan.bin alone (ir::load_rank_slice): its ops and every step's
// op count are all the lowering needs, so the program is the whole schedule's, task for task.
RankProgram lower_rank_program(const ir::RankSlice& slice, size_t schedule);

}  // namespace flexplan::codegen
