// Per rank, an interval map over [0, units): sorted segments, each holding the summary of the
// contributions on its units and the (step, op) that last wrote it. Segments are split before
// the run at the boundaries of every range written to the rank, so the writes of a typical
// plan overwrite segments in place instead of inserting into the middle of a vector.
#include "ir/summary_execution.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "ir/contribution.hpp"
#include "ir/op_text.hpp"

namespace flexplan::ir::detail {

namespace {

constexpr size_t kMembersInMessages = 16;
constexpr uint32_t kInitialStamp = 0;  // step stamps are step index + 1

struct Segment {
  uint64_t begin;
  Summary summary;
  uint32_t step_stamp;  // step index + 1 of the last write; kInitialStamp before any
  uint32_t op;          // that write's op index within its step
};

struct Piece {
  uint64_t begin;  // ends where the next piece of its op begins, or at the op's end
  Summary summary;
};

// Reads one rank's segments from a unit onwards.
struct Cursor {
  const Segment* segment;
  const Segment* last;
  uint64_t units;
  uint64_t end() const { return segment == last ? units : (segment + 1)->begin; }
};

// The index of the segment holding `unit`, searched outwards from `hint` (the rank's last
// accessed segment): schedules walk each rank's buffer in small strides, so this usually
// touches one or two cache lines where a binary search over thousands of segments would miss.
size_t segment_at(const std::vector<Segment>& segments, uint64_t unit, size_t hint) {
  const auto holds = [&](size_t j) {
    return segments[j].begin <= unit && (j + 1 == segments.size() || unit < segments[j + 1].begin);
  };
  if (holds(hint)) return hint;
  // Gallop towards the unit to bracket it, then binary search inside the bracket.
  size_t low = 0, high = segments.size();  // the answer is in [low, high)
  if (segments[hint].begin <= unit) {
    for (size_t step = 1;; step *= 2) {
      low = hint;
      if (hint + step >= segments.size() || segments[hint + step].begin > unit) {
        high = std::min(segments.size(), hint + step);
        break;
      }
      hint += step;
    }
  } else {
    for (size_t step = 1;; step *= 2) {
      high = hint;
      if (step > hint || segments[hint - step].begin <= unit) {
        low = step > hint ? 0 : hint - step;
        break;
      }
      hint -= step;
    }
  }
  auto after = std::upper_bound(segments.begin() + static_cast<std::ptrdiff_t>(low),
                                segments.begin() + static_cast<std::ptrdiff_t>(high), unit,
                                [](uint64_t u, const Segment& s) { return u < s.begin; });
  return static_cast<size_t>(after - segments.begin()) - 1;
}

std::vector<std::vector<uint64_t>> written_boundaries(const Schedule& schedule,
                                                      int32_t world_size) {
  std::vector<std::vector<uint64_t>> cuts(static_cast<size_t>(world_size));
  // Consecutive writes to a rank usually share a boundary; skipping a repeat of the last two
  // cuts halves what is sorted below.
  auto push = [](std::vector<uint64_t>& list, uint64_t cut) {
    const size_t n = list.size();
    if ((n > 0 && list[n - 1] == cut) || (n > 1 && list[n - 2] == cut)) return;
    list.push_back(cut);
  };
  auto add = [&](int32_t rank, const Op& op) {
    push(cuts[rank], op.end);
    push(cuts[rank], op.begin);
  };
  for (const Step& step : schedule.steps) {
    for (const Op& op : step.ops) {
      if (op.kind == OpKind::Reduce) {
        add(op.root, op);
      } else {
        for (int32_t member : op.group) {
          if (member != op.root) add(member, op);
        }
      }
    }
  }
  return cuts;
}

class SummaryExecution {
 public:
  SummaryExecution(const Schedule& schedule, int32_t world_size)
      : schedule_(schedule), world_size_(world_size), units_(schedule.units) {
    auto cuts = written_boundaries(schedule, world_size);
    ranks_.resize(static_cast<size_t>(world_size));
    hints_.assign(static_cast<size_t>(world_size), 0);
    for (int32_t rank = 0; rank < world_size; ++rank) {
      auto& rank_cuts = cuts[rank];
      rank_cuts.push_back(0);
      std::sort(rank_cuts.begin(), rank_cuts.end());
      rank_cuts.erase(std::unique(rank_cuts.begin(), rank_cuts.end()), rank_cuts.end());
      auto& segments = ranks_[rank];
      segments.reserve(rank_cuts.size());
      for (uint64_t cut : rank_cuts) {
        if (cut < units_) segments.push_back({cut, contribution_of(rank), kInitialStamp, 0});
      }
      std::vector<uint64_t>().swap(rank_cuts);
    }
  }

  std::optional<SummaryFault> run() {
    for (size_t s = 0; s < schedule_.steps.size(); ++s) {
      if (auto fault = run_step(s)) return fault;
    }
    return check_final_state();
  }

 private:
  std::optional<SummaryFault> run_step(size_t step_index) {
    const Step& step = schedule_.steps[step_index];
    over_count_.reset();
    pieces_.clear();
    piece_offsets_.assign(1, 0);
    // Every result from the state at step start, then every write.
    for (size_t o = 0; o < step.ops.size(); ++o) {
      const Op& op = step.ops[o];
      if (op.kind == OpKind::Reduce)
        compute_reduce(op, step_index, o);
      else
        compute_broadcast(op);
      piece_offsets_.push_back(pieces_.size());
    }
    const uint32_t stamp = static_cast<uint32_t>(step_index + 1);
    for (size_t o = 0; o < step.ops.size(); ++o) {
      const Op& op = step.ops[o];
      if (op.kind == OpKind::Reduce) {
        if (auto fault = write(op.root, step_index, o, stamp)) return fault;
      } else {
        for (int32_t member : op.group) {
          if (member == op.root) continue;
          if (auto fault = write(member, step_index, o, stamp)) return fault;
        }
      }
    }
    return over_count_;
  }

  void compute_reduce(const Op& op, size_t step_index, size_t op_index) {
    cursors_.clear();
    for (int32_t member : op.group) cursors_.push_back(cursor_at(member, op.begin));
    const size_t first_piece = pieces_.size();
    for (uint64_t at = op.begin; at < op.end;) {
      uint64_t next = op.end;
      Summary sum;
      for (const Cursor& cursor : cursors_) {
        sum += cursor.segment->summary;
        next = std::min(next, cursor.end());
      }
      if (sum.count > static_cast<uint64_t>(world_size_) && !over_count_) {
        over_count_ = SummaryFault{
            SummaryFault::Kind::OverCount,
            fmt::format("step {} op {} ({}): rank {} would hold {} contributions on unit {}, more "
                        "than the {} ranks: some are counted twice",
                        step_index, op_index, format_op(op, kMembersInMessages), op.root, sum.count,
                        at, world_size_),
            at};
      }
      emit(first_piece, at, sum);
      if (next < op.end) {
        for (Cursor& cursor : cursors_) {
          if (cursor.end() == next) ++cursor.segment;
        }
      }
      at = next;
    }
  }

  void compute_broadcast(const Op& op) {
    const size_t first_piece = pieces_.size();
    for (Cursor cursor = cursor_at(op.root, op.begin);; ++cursor.segment) {
      emit(first_piece, std::max(cursor.segment->begin, op.begin), cursor.segment->summary);
      if (cursor.end() >= op.end) break;
    }
  }

  size_t find(int32_t rank, uint64_t unit) {
    return hints_[rank] = segment_at(ranks_[rank], unit, hints_[rank]);
  }

  Cursor cursor_at(int32_t rank, uint64_t unit) {
    const auto& segments = ranks_[rank];
    return Cursor{segments.data() + find(rank, unit), &segments.back(), units_};
  }

  // Appends a piece to the op whose pieces start at first_piece, merging equal neighbours so
  // that completed ranges collapse into one piece.
  void emit(size_t first_piece, uint64_t begin, const Summary& summary) {
    if (pieces_.size() > first_piece && pieces_.back().summary == summary) return;
    pieces_.push_back({begin, summary});
  }

  // Writes op `op_index`'s pieces into `rank`'s segments, splitting a segment only where a new
  // boundary appears.
  std::optional<SummaryFault> write(int32_t rank, size_t step_index, size_t op_index,
                                    uint32_t stamp) {
    const Op& op = schedule_.steps[step_index].ops[op_index];
    auto& segments = ranks_[rank];
    size_t j = find(rank, op.begin);
    if (segments[j].begin < op.begin) split(segments, j++, op.begin);
    const size_t first = piece_offsets_[op_index], last = piece_offsets_[op_index + 1];
    for (size_t p = first; p < last; ++p) {
      const uint64_t piece_end = p + 1 < last ? pieces_[p + 1].begin : op.end;
      for (;;) {
        uint64_t segment_end = j + 1 < segments.size() ? segments[j + 1].begin : units_;
        if (segment_end > piece_end) {
          split(segments, j, piece_end);
          segment_end = piece_end;
        }
        Segment& segment = segments[j];
        if (segment.step_stamp == stamp) return conflict(rank, step_index, segment.op, op_index);
        segment.summary = pieces_[p].summary;
        segment.step_stamp = stamp;
        segment.op = static_cast<uint32_t>(op_index);
        ++j;
        if (segment_end == piece_end) break;
      }
    }
    return std::nullopt;
  }

  static void split(std::vector<Segment>& segments, size_t j, uint64_t at) {
    Segment right = segments[j];
    right.begin = at;
    segments.insert(segments.begin() + static_cast<std::ptrdiff_t>(j) + 1, right);
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
        begin,
        rank,
        begin,
        end};
  }

  std::optional<SummaryFault> check_final_state() const {
    const Summary total = all_contributions(world_size_);
    for (int32_t rank = 0; rank < world_size_; ++rank) {
      const auto& segments = ranks_[rank];
      for (size_t j = 0; j < segments.size(); ++j) {
        if (segments[j].summary == total) continue;
        size_t last = j;
        while (last + 1 < segments.size() && segments[last + 1].summary == segments[j].summary)
          ++last;
        const uint64_t end = last + 1 < segments.size() ? segments[last + 1].begin : units_;
        const Summary& held = segments[j].summary;
        return SummaryFault{
            SummaryFault::Kind::Incomplete,
            fmt::format("after the last step rank {} holds {} contributions on units [{},{}) "
                        "that are not each rank's once",
                        rank, held.count, segments[j].begin, end),
            segments[j].begin,
            rank,
            segments[j].begin,
            end};
      }
    }
    return std::nullopt;
  }

  const Schedule& schedule_;
  const int32_t world_size_;
  const uint64_t units_;
  std::vector<std::vector<Segment>> ranks_;
  std::vector<size_t> hints_;  // per rank: the segment last looked up
  // Per step: every op's result pieces, op o's in [piece_offsets_[o], piece_offsets_[o+1]).
  std::vector<Piece> pieces_;
  std::vector<size_t> piece_offsets_;
  std::vector<Cursor> cursors_;
  std::optional<SummaryFault> over_count_;
};

}  // namespace

std::optional<SummaryFault> execute_summaries(const Schedule& schedule, int32_t world_size) {
  return SummaryExecution(schedule, world_size).run();
}

}  // namespace flexplan::ir::detail
