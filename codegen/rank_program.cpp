// The point-to-point lowering of a schedule, one rank at a time (rank_program.hpp).
#include "codegen/rank_program.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <iterator>
#include <map>
#include <stdexcept>

#include "codegen/lowering.hpp"

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

// One rank's share of a schedule's base: the rank's ops in each base step, with their hops
// that touch the rank and each hop's place among its op's hops, and every base step's op count
// (which number the ops). Built from the whole base (a membership test per op) or from a
// plan.bin slice, which holds exactly the rank's ops; lowering only the rank's ops.
class RankShare {
 public:
  struct RankHop {
    Hop hop;
    uint32_t place = 0;  // among the op's hops (a star reduce's: its source's place)
  };
  struct RankOp {
    uint64_t index = 0;  // in its base step
    const ir::Op* op = nullptr;
    uint32_t hops = 0;  // all the op's hops
    std::vector<RankHop> mine;
  };

  RankShare(const ir::Schedule& base, int32_t rank) : ops_(base.steps.size()) {
    for (size_t b = 0; b < base.steps.size(); ++b) {
      const auto& ops = base.steps[b].ops;
      op_counts_.push_back(ops.size());
      for (size_t k = 0; k < ops.size(); ++k) {
        const ir::Op& op = ops[k];
        if (op.root != rank && std::find(op.group.begin(), op.group.end(), rank) == op.group.end()) continue;
        add(b, k, op, rank);
      }
    }
  }
  RankShare(const std::vector<ir::SliceStep>& base, int32_t rank) : ops_(base.size()) {
    for (size_t b = 0; b < base.size(); ++b) {
      op_counts_.push_back(base[b].op_count);
      for (const ir::SliceOp& mine : base[b].ops) add(b, mine.index, mine.op, rank);
    }
  }
  const std::vector<RankOp>& ops(size_t base_step) const { return ops_[base_step]; }
  const std::vector<uint64_t>& op_counts() const { return op_counts_; }
  size_t steps() const { return op_counts_.size(); }

 private:
  void add(size_t b, uint64_t k, const ir::Op& op, int32_t rank) {
    RankOp entry;
    entry.index = k;
    entry.op = &op;
    const auto hops = lower_op(op);
    entry.hops = static_cast<uint32_t>(hops.size());
    for (uint32_t h = 0; h < hops.size(); ++h)
      if (hops[h].src == rank || hops[h].dst == rank) entry.mine.push_back({hops[h], h});
    if (!entry.mine.empty()) ops_[b].push_back(std::move(entry));
  }
  std::vector<std::vector<RankOp>> ops_;
  std::vector<uint64_t> op_counts_;
};

// Who touched each unit last, for link_tasks: disjoint pieces covering every unit, by start,
// each with its last writer and the readers since that writer.
class UnitHistory {
 public:
  struct Piece {
    uint64_t end = 0;
    bool written = false;
    TaskRef writer;
    std::vector<TaskRef> readers;  // since the writer, in program order
  };
  UnitHistory() { pieces_.emplace(0, Piece{UINT64_MAX, false, {}, {}}); }

  // The pieces that make up [begin, end), split at its ends; calls f(piece) on each.
  template <class F>
  void each(uint64_t begin, uint64_t end, F&& f) {
    if (begin >= end) return;
    split(begin);
    if (end != UINT64_MAX) split(end);
    for (auto it = pieces_.find(begin); it != pieces_.end() && it->first < end; ++it) f(it->second);
  }

 private:
  // Makes `at` the start of a piece.
  void split(uint64_t at) {
    auto it = std::prev(pieces_.upper_bound(at));
    if (it->first == at) return;
    Piece tail = it->second;
    it->second.end = at;
    pieces_.emplace_hint(std::next(it), at, std::move(tail));
  }
  std::map<uint64_t, Piece> pieces_;  // begin -> piece
};

}  // namespace

void link_tasks(RankProgram& program) {
  UnitHistory history;
  std::vector<TaskRef> deps;
  for (size_t s = 0; s < program.steps.size(); ++s) {
    std::vector<Task>& tasks = program.steps[s].tasks;
    // Against what earlier steps did: every task of the step sees the units as of its start.
    for (Task& task : tasks) {
      task.after.clear();
      task.wakes.clear();
      const bool writes = task.writes();
      if (!writes && !task.reads_own()) continue;
      deps.clear();
      history.each(task.unit_begin, task.unit_end, [&](const UnitHistory::Piece& piece) {
        if (piece.written) deps.push_back(piece.writer);
        if (writes) deps.insert(deps.end(), piece.readers.begin(), piece.readers.end());
      });
      std::sort(deps.begin(), deps.end());
      deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
      task.after = deps;
    }
    // Then what the step did: its writers first (a reader of the step read the units before
    // them, and a staged writer lands only once the whole step, that reader included, is done).
    for (uint32_t k = 0; k < tasks.size(); ++k) {
      if (!tasks[k].writes()) continue;
      history.each(tasks[k].unit_begin, tasks[k].unit_end, [&](UnitHistory::Piece& piece) {
        piece.written = true;
        piece.writer = {static_cast<uint32_t>(s), k};
        piece.readers.clear();
      });
    }
    for (uint32_t k = 0; k < tasks.size(); ++k) {
      if (tasks[k].writes() || !tasks[k].reads_own()) continue;
      history.each(tasks[k].unit_begin, tasks[k].unit_end, [&](UnitHistory::Piece& piece) {
        piece.readers.push_back({static_cast<uint32_t>(s), k});
      });
    }
  }
  for (size_t s = 0; s < program.steps.size(); ++s) {
    for (uint32_t k = 0; k < program.steps[s].tasks.size(); ++k) {
      for (const TaskRef& before : program.steps[s].tasks[k].after)
        program.steps[before.step].tasks[before.task].wakes.push_back({static_cast<uint32_t>(s), k});
    }
  }
}

uint64_t star_source_slots(uint64_t sources) {
  if (sources > ir::kMaxStarSources)
    throw std::length_error(fmt::format("a star reduce of {} sources: the runtime's tags tell at most {} apart",
                                        sources, ir::kMaxStarSources));
  return std::bit_ceil(std::max<uint64_t>(sources, 1));
}

OpNumbers::OpNumbers(const std::vector<uint64_t>& base_ops, uint32_t slices)
    : count_(base_ops.size() + 1, 0), step_sum_(base_ops.size() + 1, 0), slices_(std::max<uint32_t>(slices, 1)) {
  for (size_t b = 0; b < base_ops.size(); ++b) {
    count_[b + 1] = count_[b] + base_ops[b];
    step_sum_[b + 1] = step_sum_[b] + b * base_ops[b];
  }
}

// Base step b's ops recur in expansion steps b .. b + slices - 1, so the ops before step t are
// sum over b < t of ops(b) min(t - b, slices) = [t C(t) - W(t)] - [u C(u) - W(u)], u = t - slices,
// with C(x) the ops before base step x and W(x) their sum of step numbers (C, W constant past
// the base's last step).
uint64_t OpNumbers::before_step(size_t step) const {
  const auto ramp = [&](size_t x) {
    const size_t at = std::min(x, count_.size() - 1);
    return x * count_[at] - step_sum_[at];
  };
  return ramp(step) - (step > slices_ ? ramp(step - slices_) : 0);
}

uint64_t OpNumbers::total() const { return count_.back() * slices_; }

namespace {

// The lowering proper, from a rank's share of a base of `units` units run on `slices` slices.
RankProgram lower_share(const RankShare& share, uint64_t units, uint32_t slices, int32_t rank) {
  // A compact pipeline is lowered from its base, step by step of its expansion
  // (pipeline_form.hpp), taking only this rank's ops: the same program as the materialized
  // schedule's, in time about linear in the base plus the rank's share of the expansion.
  RankProgram program;
  slices = std::max<uint32_t>(slices, 1);
  const size_t base_steps = share.steps();
  const OpNumbers numbers(share.op_counts(), slices);
  program.steps.resize(base_steps == 0 ? 0 : base_steps + slices - 1);
  for (size_t t = 0; t < program.steps.size(); ++t) {
    const size_t first = t + 1 > base_steps ? t + 1 - base_steps : 0;
    const size_t last = std::min<size_t>(t, slices - 1);
    const uint64_t before = numbers.before_step(t);
    uint64_t offset = 0;  // the index in step t of slice j's first op
    for (size_t j = first; j <= last; ++j) {
      const size_t b = t - j;
      for (const auto& mine : share.ops(b)) {
        const ir::Op& op = *mine.op;
        Task task;
        task.op_index = static_cast<uint32_t>(offset + mine.index);
        task.reduce = op.kind == ir::OpKind::Reduce;
        task.unit_begin = op.begin + j * units;
        task.unit_end = op.end + j * units;
        const bool star_reduce = task.reduce && op.shape == ir::OpShape::Star;
        // A star reduce's hops all end at its root, one per source, in group order.
        if (star_reduce) task.max_chunks = kMaxChunksPerRange / star_source_slots(mine.hops);
        const uint64_t message = before + task.op_index;
        // Hops come in chain order or, for a star, in group order: a star root's sources, and
        // so the order it combines them in, follow the group.
        for (const auto& [hop, place] : mine.mine) {
          const uint32_t source = star_reduce ? place : 0;
          if (hop.src == rank) task.destinations.push_back({hop.dst, message, source});
          if (hop.dst == rank) {
            task.sources.push_back({hop.src, message, source});
            task.add_own = hop.dst_contributes;
          }
        }
        if (task.add_own) {
          // A chain member adds its own to the partial sum it receives; a star root takes its
          // own at its place in the group.
          task.own_position = 1;
          if (op.shape == ir::OpShape::Star) {
            const auto at = std::find(op.group.begin(), op.group.end(), op.root);
            task.own_position = static_cast<uint32_t>(at - op.group.begin());
          }
        }
        program.steps[t].tasks.push_back(std::move(task));
      }
      offset += share.op_counts()[b];
    }
    mark_staged_writes(program.steps[t]);
  }
  route_own_reads(program, units * slices);
  return program;
}

}  // namespace

RankProgram lower_rank_program(const ir::Schedule& schedule, int32_t rank) {
  return lower_share(RankShare(schedule, rank), schedule.units, schedule.slices, rank);
}

RankProgram lower_rank_program(const ir::RankSlice& slice, size_t schedule) {
  const ir::SliceSchedule& fields = slice.schedules.at(schedule);
  const auto& steps = slice.schedules.at(fields.steps_of.value_or(schedule)).steps;
  return lower_share(RankShare(steps, slice.rank), fields.fields.units, fields.fields.slices, slice.rank);
}

}  // namespace flexplan::codegen
