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

// One rank's share of a schedule's base and what it takes to number that share's messages in
// the expansion: the rank's ops in each base step, their hops that touch the rank, and, for
// each receiver of those hops, its receives per base step (only the steps that have some). Two
// passes over the base, whatever the slice count; memory in the base's size, not the world's
// or receivers times steps.
class RankShare {
 public:
  struct RankHop {
    Hop hop;
    uint32_t slot = 0;        // the hop's receiver among the receivers
    uint64_t base_index = 0;  // the receiver's receives before this hop in the base
  };
  struct RankOp {
    uint32_t op = 0;  // index in its base step
    std::vector<RankHop> hops;
  };

  RankShare(const ir::Schedule& base, int32_t rank) : ops_(base.steps.size()) {
    // Pass 1: the rank's ops (a membership test per op) and the receivers of their hops.
    std::vector<int32_t> slot_of;  // by rank: its slot, or -1
    for (size_t b = 0; b < base.steps.size(); ++b) {
      const auto& ops = base.steps[b].ops;
      for (size_t k = 0; k < ops.size(); ++k) {
        const ir::Op& op = ops[k];
        if (op.root != rank && std::find(op.group.begin(), op.group.end(), rank) == op.group.end()) continue;
        RankOp mine;
        mine.op = static_cast<uint32_t>(k);
        for (const auto& hop : lower_op(op)) {
          if (hop.src != rank && hop.dst != rank) continue;
          const auto dst = static_cast<size_t>(hop.dst);
          if (dst >= slot_of.size()) slot_of.resize(dst + 1, -1);
          if (slot_of[dst] < 0) {
            slot_of[dst] = static_cast<int32_t>(receives_.size());
            receives_.emplace_back();
          }
          mine.hops.push_back({hop, static_cast<uint32_t>(slot_of[dst]), 0});
        }
        if (!mine.hops.empty()) ops_[b].push_back(std::move(mine));
      }
    }
    // Pass 2: every op's hops, counting those receivers' receives in the base's (step, op,
    // hop) order; the rank's hops take their receiver's count so far.
    for (size_t b = 0; b < base.steps.size(); ++b) {
      auto mine = ops_[b].begin();
      const auto& ops = base.steps[b].ops;
      for (size_t k = 0; k < ops.size(); ++k) {
        RankOp* const my_op = mine != ops_[b].end() && mine->op == k ? &*mine++ : nullptr;
        size_t my_hop = 0;
        for (const auto& hop : lower_op(ops[k])) {
          const auto dst = static_cast<size_t>(hop.dst);
          const int32_t slot = dst < slot_of.size() ? slot_of[dst] : -1;
          if (slot < 0) continue;
          Receives& receives = receives_[static_cast<size_t>(slot)];
          // Pass 1 kept exactly these hops of the op, in this order.
          if (my_op && (hop.src == rank || hop.dst == rank)) my_op->hops[my_hop++].base_index = receives.total();
          receives.add(b);
        }
      }
    }
  }

  const std::vector<RankOp>& ops(size_t base_step) const { return ops_[base_step]; }
  // The receiver's receives in base steps before `base_step`.
  uint64_t before(uint32_t slot, size_t base_step) const { return receives_[slot].before(base_step).count; }
  // The receiver's receives in the expansion steps before t of a pipeline of `slices`: base
  // step b's receives recur in expansion steps b .. b + slices - 1, so it counts
  // sum over b < t of R(b) min(t - b, slices) = [t C(t) - W(t)] - [u C(u) - W(u)], u = t - slices,
  // with C(x) the receives before base step x and W(x) their sum of step numbers.
  uint64_t before_expansion_step(uint32_t slot, size_t t, uint32_t slices) const {
    const Receives& receives = receives_[slot];
    const auto ramp = [&](size_t x) {
      const Prefix prefix = receives.before(x);
      return x * prefix.count - prefix.step_sum;
    };
    return ramp(t) - (t > slices ? ramp(t - slices) : 0);
  }

 private:
  struct Prefix {
    uint64_t count = 0, step_sum = 0;  // receives before a step, and the sum of their steps
  };
  // One receiver's receives: the base steps that have some, ascending, with the running
  // totals after each.
  class Receives {
   public:
    void add(size_t step) {
      if (steps_.empty() || steps_.back() != step) {
        steps_.push_back(step);
        after_.push_back(after_.empty() ? Prefix{} : after_.back());
      }
      after_.back().count += 1;
      after_.back().step_sum += step;
    }
    uint64_t total() const { return after_.empty() ? 0 : after_.back().count; }
    Prefix before(size_t step) const {
      const auto at = std::lower_bound(steps_.begin(), steps_.end(), step) - steps_.begin();
      return at == 0 ? Prefix{} : after_[static_cast<size_t>(at - 1)];
    }

   private:
    std::vector<size_t> steps_;
    std::vector<Prefix> after_;
  };

  std::vector<std::vector<RankOp>> ops_;
  std::vector<Receives> receives_;  // by slot
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

RankProgram lower_rank_program(const ir::Schedule& schedule, int32_t rank) {
  // A compact pipeline is lowered from its base, step by step of its expansion
  // (pipeline_form.hpp), taking only this rank's ops: the same program as the materialized
  // schedule's, in time about linear in the base plus the rank's share of the expansion.
  RankProgram program;
  const RankShare share(schedule, rank);
  program.steps.resize(ir::expanded_step_count(schedule, schedule.slices));
  for (size_t t = 0; t < program.steps.size(); ++t) {
    const size_t first = ir::first_slice_in_step(schedule, t);
    const size_t last = ir::last_slice_in_step(schedule.slices, t);
    size_t offset = 0;  // the index in step t of slice j's first op
    for (size_t j = first; j <= last; ++j) {
      const size_t b = t - j;
      for (const auto& mine : share.ops(b)) {
        const ir::Op& op = schedule.steps[b].ops[mine.op];
        Task task;
        task.op_index = static_cast<uint32_t>(offset + mine.op);
        task.reduce = op.kind == ir::OpKind::Reduce;
        task.unit_begin = op.begin + j * schedule.units;
        task.unit_end = op.end + j * schedule.units;
        // Hops come in chain order or, for a star, in group order: a star root's sources, and
        // so the order it combines them in, follow the group.
        for (const auto& [hop, slot, base_index] : mine.hops) {
          // The receiver's receives before this one: in earlier expansion steps, in this step's
          // slices before j (base steps b + 1 .. t - first), and in base step b before it.
          const uint64_t index = share.before_expansion_step(slot, t, schedule.slices) +
                                 share.before(slot, t - first + 1) - share.before(slot, b + 1) +
                                 base_index - share.before(slot, b);
          if (hop.src == rank) task.destinations.push_back({hop.dst, index});
          if (hop.dst == rank) {
            task.sources.push_back({hop.src, index});
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
      offset += schedule.steps[b].ops.size();
    }
    mark_staged_writes(program.steps[t]);
  }
  route_own_reads(program, ir::expanded_units(schedule));
  return program;
}

}  // namespace flexplan::codegen
