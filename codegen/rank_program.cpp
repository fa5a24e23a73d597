// The chained point-to-point lowering of a schedule, one rank at a time (rank_program.hpp).
#include "codegen/rank_program.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/core.h>

#include "codegen/lowering.hpp"

namespace flexplan::codegen {
namespace {

bool overlap(const Task& a, const Task& b) {
  return a.unit_begin < b.unit_end && b.unit_begin < a.unit_end;
}

void mark_staged_writes(StepProgram& step) {
  for (size_t i = 0; i < step.tasks.size(); ++i) {
    Task& writer = step.tasks[i];
    if (!writer.writes()) continue;
    for (size_t j = 0; j < step.tasks.size() && !writer.stage_writes; ++j) {
      const Task& other = step.tasks[j];
      if (j != i && (other.reads_own() || other.writes()) && overlap(writer, other)) {
        writer.stage_writes = true;
      }
    }
  }
}

// Disjoint, sorted unit ranges that earlier steps wrote on this rank.
class WrittenRanges {
 public:
  void add(UnitRange range) {
    std::vector<UnitRange> merged;
    for (const UnitRange& r : ranges_) {
      if (r.end < range.begin || range.end < r.begin) {
        merged.push_back(r);
      } else {
        range = {std::min(r.begin, range.begin), std::max(r.end, range.end)};
      }
    }
    merged.push_back(range);
    std::sort(merged.begin(), merged.end(), [](auto& a, auto& b) { return a.begin < b.begin; });
    ranges_ = std::move(merged);
  }
  // The parts of `range` not written yet.
  std::vector<UnitRange> unwritten(UnitRange range) const {
    std::vector<UnitRange> gaps;
    uint64_t at = range.begin;
    for (const UnitRange& r : ranges_) {
      if (r.end <= at) continue;
      if (r.begin >= range.end) break;
      if (r.begin > at) gaps.push_back({at, r.begin});
      at = std::max(at, r.end);
    }
    if (at < range.end) gaps.push_back({at, range.end});
    return gaps;
  }

 private:
  std::vector<UnitRange> ranges_;
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
  program.steps.resize(schedule.steps.size());
  std::vector<uint64_t> receives_of;  // by rank: receives numbered so far
  for (size_t s = 0; s < schedule.steps.size(); ++s) {
    const auto& ops = schedule.steps[s].ops;
    for (size_t o = 0; o < ops.size(); ++o) {
      if (ops[o].shape != ir::OpShape::Chain)
        throw std::invalid_argument(fmt::format(
            "schedule '{}' step {} op {}: star ops have no chained point-to-point lowering yet",
            schedule.algorithm, s, o));
      Task task;
      task.op_index = static_cast<uint32_t>(o);
      task.reduce = ops[o].kind == ir::OpKind::Reduce;
      task.unit_begin = ops[o].begin;
      task.unit_end = ops[o].end;
      bool involved = false;
      for (const auto& hop : lower_op(ops[o])) {
        const auto dst = static_cast<size_t>(hop.dst);
        if (dst >= receives_of.size()) receives_of.resize(dst + 1, 0);
        if (hop.src == rank) {
          task.next = hop.dst;
          task.next_receive_index = receives_of[dst];
          involved = true;
        }
        if (hop.dst == rank) {
          task.prev = hop.src;
          task.add_own = hop.dst_contributes;
          task.receive_index = receives_of[dst];
          involved = true;
        }
        ++receives_of[dst];
      }
      if (involved) program.steps[s].tasks.push_back(task);
    }
    mark_staged_writes(program.steps[s]);
  }
  route_own_reads(program, schedule.units);
  return program;
}

}  // namespace flexplan::codegen
