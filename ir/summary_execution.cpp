// Runs a schedule on a window of units: per rank, an interval map (RankSegments) of summaries.
// Each step computes every op's result from the state at step start, checks that no two ops
// write one unit of one rank, then writes. A window whose state outgrows the budget is run
// again as smaller windows.
#include "ir/summary_execution.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <span>
#include <vector>

#include "ir/collective_contract.hpp"
#include "ir/contribution.hpp"
#include "ir/op_text.hpp"
#include "ir/rank_segments.hpp"

namespace flexplan::ir::detail {

namespace {

constexpr size_t kMembersInMessages = 16;
constexpr size_t kMinimumBudget = size_t{1} << 20;
constexpr uint64_t kWindowSplit = 8;  // an over-budget window is run again as this many
// Past this many writes to one rank in one step, they are checked for overlaps by sorting at
// the end of the step rather than each against all the others.
constexpr size_t kLinearWriteChecks = 32;

using Segments = RankSegments<Summary>;
using Segment = Segments::Segment;

// The writes of the current step to one rank, to find two that overlap.
struct WriteMark {
  uint64_t max_end = 0;   // the end of the write that ends last
  uint32_t stamp = 0;     // step index + 1 of the step these writes belong to
  uint32_t count = 0;     // writes to the rank in this step
  int64_t last = -1;      // index of the latest run in extra_; each links to the one before
  bool deferred = false;  // its writes go to deferred_, to be sorted at the end of the step
};
// A run of one rank's writes in a step, each starting where the one before it ended (a
// chain's receiver takes block after block): the checks need only the union they wrote.
struct ExtraWrite {
  uint64_t begin, end;
  uint32_t op;  // the op of the run's first write
  int64_t next;
};
struct DeferredWrite {
  int32_t rank;
  uint64_t begin, end;
  uint32_t op;
  auto key() const { return std::tuple(rank, begin, op); }
};

struct Cursor {
  int32_t rank;
  size_t index;
  uint64_t end;
  Summary value;
};

enum class Outcome { Done, Fault, OverBudget };

class WindowExecution {
 public:
  WindowExecution(const Schedule& schedule, int32_t world_size, size_t budget)
      : schedule_(schedule),
        world_size_(world_size),
        budget_(budget),
        total_(all_contributions(world_size)),
        ranks_(static_cast<size_t>(world_size)),
        hints_(static_cast<size_t>(world_size), 0),
        marks_(static_cast<size_t>(world_size)) {}

  Outcome run(uint64_t low, uint64_t high, bool unlimited, std::optional<SummaryFault>& fault) {
    low_ = low;
    high_ = high;
    limit_ = unlimited ? ~size_t{0} : budget_;
    segments_ = 0;
    for (int32_t rank = 0; rank < world_size_; ++rank) {
      start_state(rank);
      hints_[rank] = 0;
      marks_[rank].stamp = 0;
    }
    for (size_t s = 0; s < schedule_.steps.size(); ++s) {
      const Outcome outcome = run_step(s, fault);
      if (outcome != Outcome::Done) return outcome;
    }
    fault = check_final_state();
    return fault ? Outcome::Fault : Outcome::Done;
  }

 private:
  // The rank's holding before the first step (collective_contract.hpp): its input, or no
  // data (an empty summary, which no right result equals). In a collective that only copies,
  // data moves within its unit, and on each unit only its owner starts with data: any data a
  // rank holds there is the owner's. One token for every owner's input is then exact, and it
  // lets a rank's right final state be one segment instead of one per shard.
  Summary initial_value(const HoldingRun& run, int32_t rank) const {
    if (run.holding != Holding::Own) return Summary{};
    return copies_only_ ? copy_token() : contribution_of(rank);
  }
  static Summary copy_token() { return Summary{1, mix64(~uint64_t{0}), mix64(~uint64_t{1})}; }
  // What a rank must hold where the contract asks for a copy of `source`'s input.
  Summary copy_of(int32_t source) const {
    return copies_only_ ? copy_token() : contribution_of(source);
  }

  void start_state(int32_t rank) {
    HoldingRun run = contract_.before(rank, low_);
    ranks_[rank].reset(low_, initial_value(run, rank));
    ++segments_;
    size_t hint = 0;
    for (uint64_t at = run.end; at < high_; at = run.end) {
      run = contract_.before(rank, at);
      const Segment piece{at, initial_value(run, rank)};
      segments_ += ranks_[rank].assign(at, std::min(run.end, high_), high_,
                                       std::span<const Segment>(&piece, 1), scratch_, hint);
    }
  }

  bool clip(const Op& op, uint64_t& begin, uint64_t& end) const {
    begin = std::max(op.begin, low_);
    end = std::min(op.end, high_);
    return begin < end;
  }

  Outcome run_step(size_t step_index, std::optional<SummaryFault>& fault) {
    const Step& step = schedule_.steps[step_index];
    pieces_.clear();
    active_.clear();
    // Every result from the state at step start.
    for (size_t o = 0; o < step.ops.size(); ++o) {
      const Op& op = step.ops[o];
      uint64_t begin, end;
      if (!clip(op, begin, end)) continue;
      active_.push_back({o, pieces_.size(), begin, end});
      if (op.kind == OpKind::Reduce)
        compute_reduce(op, begin, end);
      else
        compute_broadcast(op, begin, end);
      if (pieces_.size() > limit_) return Outcome::OverBudget;
    }
    active_.push_back({step.ops.size(), pieces_.size(), 0, 0});
    // Then every write, each checked against the step's other writes to the same rank.
    const uint32_t stamp = static_cast<uint32_t>(step_index + 1);
    deferred_.clear();
    extra_.clear();
    for (size_t a = 0; a + 1 < active_.size(); ++a) {
      const Active& act = active_[a];
      const Op& op = step.ops[act.op];
      const std::span<const Segment> pieces(pieces_.data() + act.first_piece,
                                            active_[a + 1].first_piece - act.first_piece);
      auto write = [&](int32_t rank) {
        if (auto conflict = note_write(rank, a, stamp, step_index)) {
          fault = std::move(conflict);
          return Outcome::Fault;
        }
        segments_ += ranks_[rank].assign(act.begin, act.end, high_, pieces, scratch_, hints_[rank]);
        return segments_ > limit_ ? Outcome::OverBudget : Outcome::Done;
      };
      if (op.kind == OpKind::Reduce) {
        if (const Outcome outcome = write(op.root); outcome != Outcome::Done) return outcome;
      } else {
        for (int32_t member : op.group) {
          if (member == op.root) continue;
          if (const Outcome outcome = write(member); outcome != Outcome::Done) return outcome;
        }
      }
    }
    if (auto conflict = check_deferred_writes(step_index)) {
      fault = std::move(conflict);
      return Outcome::Fault;
    }
    return Outcome::Done;
  }

  struct Active {
    size_t op;
    size_t first_piece;
    uint64_t begin, end;  // the op's range within the window
  };

  void compute_reduce(const Op& op, uint64_t begin, uint64_t end) {
    cursors_.clear();
    Summary sum;
    for (int32_t member : op.group) {
      const Segments& segments = ranks_[member];
      const size_t index = hints_[member] = segments.find(begin, hints_[member]);
      const Summary& value = segments.at(index).value;
      cursors_.push_back({member, index, segments.end_of(index, high_), value});
      sum += value;
    }
    const size_t first_piece = pieces_.size();
    for (uint64_t at = begin;;) {
      uint64_t next = end;
      for (const Cursor& cursor : cursors_) next = std::min(next, cursor.end);
      emit(first_piece, at, sum.capped(world_size_));
      if (next >= end) return;
      for (Cursor& cursor : cursors_) {
        if (cursor.end != next) continue;
        const Segments& segments = ranks_[cursor.rank];
        sum -= cursor.value;
        ++cursor.index;
        cursor.value = segments.at(cursor.index).value;
        cursor.end = segments.end_of(cursor.index, high_);
        sum += cursor.value;
      }
      at = next;
    }
  }

  void compute_broadcast(const Op& op, uint64_t begin, uint64_t end) {
    const Segments& segments = ranks_[op.root];
    size_t index = hints_[op.root] = segments.find(begin, hints_[op.root]);
    for (;; ++index) {
      pieces_.push_back({std::max(segments.at(index).begin, begin), segments.at(index).value});
      if (segments.end_of(index, high_) >= end) return;
    }
  }

  // Appends a piece to the op whose pieces start at first_piece, merging equal neighbours.
  void emit(size_t first_piece, uint64_t begin, const Summary& value) {
    if (pieces_.size() > first_piece && pieces_.back().value == value) return;
    pieces_.push_back({begin, value});
  }

  // Records that op act.op writes `rank` on its range in this step; the conflict if another op
  // of the step wrote an overlapping range of that rank. Writes that come in unit order (as
  // they do in the schedules the planner writes) are checked in O(1) against the latest end.
  std::optional<SummaryFault> note_write(int32_t rank, size_t a, uint32_t stamp,
                                         size_t step_index) {
    const Active& act = active_[a];
    WriteMark& mark = marks_[rank];
    const uint32_t op = static_cast<uint32_t>(act.op);
    if (mark.stamp != stamp) mark = WriteMark{0, stamp, 0, -1, false};
    if (mark.deferred) {
      deferred_.push_back({rank, act.begin, act.end, op});
    } else if (mark.count > 0 && act.begin < mark.max_end) {
      // Out of order: compare with each earlier write, or, past a few, sort them all later.
      if (mark.count >= kLinearWriteChecks) {
        mark.deferred = true;
        deferred_.push_back({rank, act.begin, act.end, op});
        for (int64_t i = mark.last; i >= 0; i = extra_[i].next)
          deferred_.push_back({rank, extra_[i].begin, extra_[i].end, extra_[i].op});
      } else {
        for (int64_t i = mark.last; i >= 0; i = extra_[i].next) {
          if (act.begin < extra_[i].end && extra_[i].begin < act.end)
            return conflict(rank, step_index,
                            latest_overlapping_write(rank, a, extra_[i].op, step_index), op);
        }
      }
    }
    if (!mark.deferred) {
      if (mark.last >= 0 && extra_[mark.last].end == act.begin) {
        extra_[mark.last].end = act.end;
      } else {
        extra_.push_back({act.begin, act.end, op, mark.last});
        mark.last = static_cast<int64_t>(extra_.size()) - 1;
      }
    }
    mark.max_end = std::max(mark.max_end, act.end);
    ++mark.count;
    return std::nullopt;
  }

  std::optional<SummaryFault> check_deferred_writes(size_t step_index) {
    std::sort(deferred_.begin(), deferred_.end(),
              [](const DeferredWrite& a, const DeferredWrite& b) { return a.key() < b.key(); });
    for (size_t i = 1; i < deferred_.size(); ++i) {
      const DeferredWrite &a = deferred_[i - 1], &b = deferred_[i];
      if (a.rank == b.rank && b.begin < a.end) return first_conflict_of(a.rank, step_index);
    }
    return std::nullopt;
  }

  static bool writes(const Op& op, int32_t rank) {
    if (op.kind == OpKind::Reduce) return op.root == rank;
    return rank != op.root && std::find(op.group.begin(), op.group.end(), rank) != op.group.end();
  }

  // The latest op before active_[a] whose write to `rank` overlaps active_[a]'s, found in the
  // run of writes that starts with op `first_op` (a run keeps only its first op).
  size_t latest_overlapping_write(int32_t rank, size_t a, uint32_t first_op, size_t step_index) const {
    const std::vector<Op>& ops = schedule_.steps[step_index].ops;
    const Active& act = active_[a];
    for (size_t b = a; b-- > 0 && active_[b].op >= first_op;) {
      const Active& earlier = active_[b];
      if (earlier.begin < act.end && act.begin < earlier.end && writes(ops[earlier.op], rank))
        return earlier.op;
    }
    return first_op;
  }

  // The conflict the step's writes to `rank` hold, each write on its own: the first two that
  // overlap in order of their begin, then op. Paid only when reporting a fault (the deferred
  // list holds runs of writes, not their ops).
  SummaryFault first_conflict_of(int32_t rank, size_t step_index) const {
    const std::vector<Op>& ops = schedule_.steps[step_index].ops;
    std::vector<std::pair<uint64_t, uint64_t>> writes_to;  // (begin, active index)
    for (size_t b = 0; b + 1 < active_.size(); ++b)
      if (writes(ops[active_[b].op], rank)) writes_to.emplace_back(active_[b].begin, b);
    std::sort(writes_to.begin(), writes_to.end(), [&](const auto& x, const auto& y) {
      return std::pair(x.first, active_[x.second].op) < std::pair(y.first, active_[y.second].op);
    });
    for (size_t i = 1; i < writes_to.size(); ++i) {
      const Active &x = active_[writes_to[i - 1].second], &y = active_[writes_to[i].second];
      if (y.begin < x.end)
        return conflict(rank, step_index, std::min(x.op, y.op), std::max(x.op, y.op));
    }
    return conflict(rank, step_index, 0, 0);  // not reached: the runs overlap only where writes do
  }

  SummaryFault conflict(int32_t rank, size_t step_index, size_t first_op, size_t second_op) const {
    const Op& a = schedule_.steps[step_index].ops[first_op];
    const Op& b = schedule_.steps[step_index].ops[second_op];
    const uint64_t begin = std::max(a.begin, b.begin), end = std::min(a.end, b.end);
    return SummaryFault{
        SummaryFault::Kind::WriteConflict,
        fmt::format("step {}: op {} ({}) and op {} ({}) both write rank {} on units [{},{})",
                    step_index, first_op, format_op(a, kMembersInMessages), second_op,
                    format_op(b, kMembersInMessages), rank, begin, end),
        std::max(begin, low_),
        rank,
        begin,
        end};
  }

  std::optional<SummaryFault> check_final_state() const {
    for (int32_t rank = 0; rank < world_size_; ++rank) {
      const Segments& segments = ranks_[rank];
      for (size_t j = 0; j < segments.size(); ++j) {
        const Summary& held = segments.at(j).value;
        const uint64_t begin = segments.at(j).begin, end = segments.end_of(j, high_);
        // The segment may span several runs of the contract (an all-gather's shards).
        for (uint64_t at = begin; at < end;) {
          const HoldingRun run = contract_.after(rank, at);
          const uint64_t to = std::min(run.end, end);
          if (run.holding == Holding::Sum && !(held == total_))
            return incomplete(rank, at, to, held, "that are not each rank's once");
          if (run.holding == Holding::CopyOf && !(held == copy_of(run.source))) {
            // The run may hold several owners' shards: name the first one's.
            const uint64_t owned_to = std::min(to, shard_of(schedule_, world_size_, run.source).end);
            return incomplete(rank, at, std::max(owned_to, at + 1), held,
                              fmt::format("where it must hold rank {}'s input", run.source));
          }
          at = to;
        }
      }
    }
    return std::nullopt;
  }

  SummaryFault incomplete(int32_t rank, uint64_t begin, uint64_t end, const Summary& held,
                          const std::string& want) const {
    return SummaryFault{SummaryFault::Kind::Incomplete,
                        fmt::format("after the last step rank {} holds {} on units [{},{}) {}",
                                    rank, describe_held(held), begin, end, want),
                        begin,
                        rank,
                        begin,
                        end};
  }

  // Words for a summary: "no data", "rank 3's input", "4 contributions". Finding the rank of a
  // single input costs a pass over the ranks, paid only when reporting a fault.
  std::string describe_held(const Summary& held) const {
    if (held.count == 0) return "no data";
    if (held.count > static_cast<uint64_t>(world_size_))
      return fmt::format("more than {} contributions", world_size_);
    if (held.count == 1 && copies_only_) return "the owner's data";
    if (held.count == 1)
      for (int32_t r = 0; r < world_size_; ++r)
        if (held == contribution_of(r)) return fmt::format("rank {}'s input alone", r);
    return fmt::format("{} contributions", held.count);
  }

  const Schedule& schedule_;
  const int32_t world_size_;
  const bool copies_only_ = !combines(schedule_.collective);
  const ContractView contract_{schedule_, world_size_};
  const size_t budget_;
  const Summary total_;
  uint64_t low_ = 0, high_ = 0;
  size_t limit_ = 0;
  size_t segments_ = 0;  // held by all ranks together
  std::vector<Segments> ranks_;
  std::vector<size_t> hints_;  // per rank: the segment last looked up
  std::vector<WriteMark> marks_;
  std::vector<ExtraWrite> extra_;
  std::vector<DeferredWrite> deferred_;
  // Per step: the ops touching the window and their result pieces.
  std::vector<Active> active_;
  std::vector<Segment> pieces_;
  std::vector<Segment> scratch_;
  std::vector<Cursor> cursors_;
};

size_t default_budget(const Schedule& schedule, int32_t world_size) {
  size_t size = static_cast<size_t>(world_size);
  for (const Step& step : schedule.steps) {
    for (const Op& op : step.ops) size += 1 + op.group.size();
  }
  return std::max(kMinimumBudget, 4 * size);
}

}  // namespace

std::optional<SummaryFault> execute_summaries(const Schedule& schedule, int32_t world_size,
                                              uint64_t low, uint64_t high, size_t segment_budget) {
  if (low >= high) return std::nullopt;
  WindowExecution execution(schedule, world_size,
                            segment_budget ? segment_budget : default_budget(schedule, world_size));
  // Windows still to run, the next one last; an over-budget window is replaced by its parts.
  std::vector<std::pair<uint64_t, uint64_t>> windows{{low, high}};
  while (!windows.empty()) {
    const uint64_t begin = windows.back().first, end = windows.back().second;
    windows.pop_back();
    std::optional<SummaryFault> fault;
    // A single unit holds one segment per rank: it always fits.
    const Outcome outcome = execution.run(begin, end, end - begin == 1, fault);
    if (outcome == Outcome::Fault) return fault;
    if (outcome == Outcome::Done) continue;
    const uint64_t width = end - begin, parts = std::min(width, kWindowSplit);
    for (uint64_t part = parts; part-- > 0;) {
      const auto cut = [&](uint64_t k) {
        return begin + static_cast<uint64_t>(static_cast<unsigned __int128>(width) * k / parts);
      };
      windows.emplace_back(cut(part), cut(part + 1));
    }
  }
  return std::nullopt;
}

}  // namespace flexplan::ir::detail
