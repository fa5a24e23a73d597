// The point-to-point lowering of a schedule, one rank at a time (rank_program.hpp).
#include "codegen/rank_program.hpp"

#include <algorithm>
#include <iterator>
#include <map>

#include "codegen/lowering.hpp"
#include "ir/pipeline_form.hpp"

namespace flexplan::codegen {
namespace {

// A writer is staged when its range overlaps another task's that reads its own data or writes.
// One sweep over those ranges sorted by start (a step may hold tens of thousands of tasks):
// range k overlaps an earlier one iff the furthest end before it passes its start, and a later
// one iff the next range starts before its end.
void mark_staged_writes(StepProgram& step) {
  std::vector<size_t> touching;
  for (size_t i = 0; i < step.tasks.size(); ++i) {
    if (step.tasks[i].reads_own() || step.tasks[i].writes()) touching.push_back(i);
  }
  std::sort(touching.begin(), touching.end(),
            [&](size_t a, size_t b) { return step.tasks[a].unit_begin < step.tasks[b].unit_begin; });
  uint64_t furthest_end = 0;
  for (size_t k = 0; k < touching.size(); ++k) {
    Task& task = step.tasks[touching[k]];
    const bool overlaps_earlier = k > 0 && furthest_end > task.unit_begin;
    const bool overlaps_later =
        k + 1 < touching.size() && step.tasks[touching[k + 1]].unit_begin < task.unit_end;
    if (task.writes() && (overlaps_earlier || overlaps_later)) task.stage_writes = true;
    furthest_end = std::max(furthest_end, task.unit_end);
  }
}

// Disjoint unit ranges that earlier steps wrote on this rank, by start.
class WrittenRanges {
 public:
  void add(UnitRange range) {
    // Merge with every range that overlaps or touches it.
    auto it = ranges_.upper_bound(range.begin);
    if (it != ranges_.begin() && std::prev(it)->second >= range.begin) --it;
    while (it != ranges_.end() && it->first <= range.end) {
      range = {std::min(it->first, range.begin), std::max(it->second, range.end)};
      it = ranges_.erase(it);
    }
    ranges_.emplace(range.begin, range.end);
  }
  // The parts of `range` not written yet.
  std::vector<UnitRange> unwritten(UnitRange range) const {
    std::vector<UnitRange> gaps;
    uint64_t at = range.begin;
    auto it = ranges_.upper_bound(range.begin);
    if (it != ranges_.begin()) --it;
    for (; it != ranges_.end() && it->first < range.end; ++it) {
      if (it->second <= at) continue;
      if (it->first > at) gaps.push_back({at, it->first});
      at = std::max(at, it->second);
    }
    if (at < range.end) gaps.push_back({at, range.end});
    return gaps;
  }

 private:
  std::map<uint64_t, uint64_t> ranges_;  // begin -> end
};

// Where each reading task finds its own data: the send buffer while nothing wrote the range,
// else the receive buffer (after copying in the unwritten parts of a partly written range).
void route_own_reads(RankProgram& program, uint64_t units) {
  WrittenRanges written;
  for (StepProgram& step : program.steps) {
    for (Task& task : step.tasks) {
      if (!task.reads_own()) continue;
      const UnitRange range{task.unit_begin, task.unit_end};
      const auto gaps = written.unwritten(range);
      task.own_from_send = gaps.size() == 1 && gaps[0] == range;
      if (!task.own_from_send) step.copy_in.insert(step.copy_in.end(), gaps.begin(), gaps.end());
    }
    for (const UnitRange& range : step.copy_in) written.add(range);  // now holds the input
    for (const Task& task : step.tasks) {
      if (task.writes()) written.add({task.unit_begin, task.unit_end});
    }
  }
  program.copy_at_end = written.unwritten({0, units});
}

}  // namespace

RankProgram lower_rank_program(const ir::Schedule& schedule, int32_t rank) {
  RankProgram program;
  // A compact pipeline is lowered step by step of its expansion, read from the base
  // (pipeline_form.hpp): the same program as the materialized schedule's.
  program.steps.resize(ir::expanded_step_count(schedule, schedule.slices));
  std::vector<uint64_t> receives_of;  // by rank: receives numbered so far
  for (size_t s = 0; s < program.steps.size(); ++s) {
    size_t o = 0;
    ir::for_each_expanded_op(schedule, schedule.slices, s, [&](size_t slice, const ir::Op& op) {
      const uint64_t offset = slice * schedule.units;
      Task task;
      task.op_index = static_cast<uint32_t>(o++);
      task.reduce = op.kind == ir::OpKind::Reduce;
      task.unit_begin = op.begin + offset;
      task.unit_end = op.end + offset;
      // Hops come in chain order or, for a star, in group order: a star root's sources, and so
      // the order it combines them in, follow the group.
      for (const auto& hop : lower_op(op)) {
        const auto dst = static_cast<size_t>(hop.dst);
        if (dst >= receives_of.size()) receives_of.resize(dst + 1, 0);
        if (hop.src == rank) task.destinations.push_back({hop.dst, receives_of[dst]});
        if (hop.dst == rank) {
          task.sources.push_back({hop.src, receives_of[dst]});
          task.add_own = hop.dst_contributes;
        }
        ++receives_of[dst];
      }
      if (!task.receives() && !task.sends()) return;
      if (task.add_own) {
        // A chain member adds its own to the partial sum it receives; a star root takes its
        // own at its place in the group.
        task.own_position = 1;
        if (op.shape == ir::OpShape::Star) {
          const auto at = std::find(op.group.begin(), op.group.end(), op.root);
          task.own_position = static_cast<uint32_t>(at - op.group.begin());
        }
      }
      program.steps[s].tasks.push_back(std::move(task));
    });
    mark_staged_writes(program.steps[s]);
  }
  route_own_reads(program, ir::expanded_units(schedule));
  return program;
}

}  // namespace flexplan::codegen
