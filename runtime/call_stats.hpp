// What the calls of a communicator cost on this rank, per schedule of its plan: measured time
// beside the plan's prediction, and the time of each step (Communicator::stats, FLEXPLAN_STATS).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/plan.hpp"

namespace flexplan {

struct StepStats {
  int32_t level = 0;       // the tree level whose links the step exercises (ir::Step::level)
  double measured = 0;     // seconds on this rank, summed over the calls
  double predicted = -1;   // seconds the cost model gives, summed; negative: no topology known
};

struct ScheduleStats {
  std::string algorithm;
  ir::Collective collective = ir::Collective::AllReduce;
  int32_t root = 0;
  uint64_t min_bytes = 0;
  std::optional<uint64_t> max_bytes;
  uint32_t plan_generation = 0;  // 0: the plan loaded at creation; n: after the n-th re-plan
  uint64_t calls = 0;
  double measured = 0;    // seconds from start to completion on this rank, summed
  double predicted = -1;  // the plan's prediction for the same calls, summed; negative: unknown
  std::vector<StepStats> steps;
};

// Per peer (by plan rank), what one rank's transfers with it took in one call: the seconds from
// each send's post to its completion and from each receive's post to its arrival, summed, with
// their bytes and counts (single-copy sends are not counted). A slow link backs up the sends that
// cross it and the receives behind them, while a late peer lengthens only the receives from it:
// the per-link estimates compare both ends of each pair (docs/runtime.md, Per-link estimates).
struct PeerWaits {
  std::vector<double> send_seconds, recv_seconds;
  std::vector<uint64_t> send_bytes, recv_bytes, sends, recvs;
  void reset(size_t world);
};

struct CommStats {
  int32_t rank = 0;
  // Whether calls are timed at all: FLEXPLAN_STATS=1 or FLEXPLAN_REPLAN=detect|auto (off, the
  // runtime reads no clock for them and `schedules` stays empty).
  bool timed = false;
  uint32_t plan_generation = 0;  // re-plans so far
  // Every schedule that ran at least once, the current plan's and those of earlier plans.
  std::vector<ScheduleStats> schedules;
  // Drift reports, re-plans and refused re-plans, in order, as they were printed.
  std::vector<std::string> events;
};

// What a re-plan did (Communicator::replan).
struct ReplanResult {
  bool switched = false;
  uint64_t call = 0;    // the call number from which the new plan runs (or would have run)
  std::string message;  // what happened, or why the old plan stays
};

// One line per schedule ("allreduce ring [0, 1 MiB): 120 calls, 3.1 ms/call measured, 2.0 ms
// predicted (1.55x); most time: step 4, level 1, 41%"), then the events.
std::string format_stats(const CommStats& stats);

}  // namespace flexplan
