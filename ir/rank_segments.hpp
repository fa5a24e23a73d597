// One rank's interval map for the verifier (internal to the IR library): the values a rank
// holds on a window [low, high) of units, as sorted segments that each start at `begin` and end
// where the next starts (the last at `high`). Adjacent segments always hold different values:
// a write merges with equal neighbours, so a range that a schedule completes becomes one
// segment again.
//
// Stored as a gap buffer: the segments before the gap, a gap of free slots, the segments after
// it. A write moves the gap to where it writes, so writes that walk a rank's buffer in small
// strides (a ring hands on one chunk after another) cost O(1) each instead of shifting the
// whole tail of a vector.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace flexplan::ir::detail {

template <typename Value>
class RankSegments {
 public:
  struct Segment {
    uint64_t begin;
    Value value;
  };

  // One segment holding `value` from `low` on; keeps the storage for reuse.
  void reset(uint64_t low, const Value& value) {
    if (slots_.empty()) slots_.resize(2);
    slots_[0] = Segment{low, value};
    gap_begin_ = 1;
    gap_end_ = slots_.size();
  }

  size_t size() const { return slots_.size() - (gap_end_ - gap_begin_); }
  const Segment& at(size_t i) const { return slots_[physical(i)]; }
  uint64_t end_of(size_t i, uint64_t high) const { return i + 1 < size() ? at(i + 1).begin : high; }

  // The index of the segment holding `unit`, looked for first at `hint` and its successor.
  size_t find(uint64_t unit, size_t hint) const {
    const size_t n = size();
    if (hint < n && at(hint).begin <= unit) {
      if (hint + 1 == n || unit < at(hint + 1).begin) return hint;
      if (hint + 2 == n || unit < at(hint + 2).begin) return hint + 1;
    }
    size_t low = 0, high = n;  // the answer is the last index in [low, high) with begin <= unit
    while (high - low > 1) {
      const size_t mid = low + (high - low) / 2;
      if (at(mid).begin <= unit)
        low = mid;
      else
        high = mid;
    }
    return low;
  }

  // Makes [begin, end) hold `pieces` (sorted, adjacent ones different, the first starting at
  // `begin`, each ending where the next starts and the last at `end`), merging with equal
  // neighbours; `high` is the window's end. `scratch` is reused storage. Returns the change in
  // the number of segments.
  ptrdiff_t assign(uint64_t begin, uint64_t end, uint64_t high, std::span<const Segment> pieces,
                   std::vector<Segment>& scratch, size_t hint) {
    const size_t before = size();
    const size_t first = find(begin, hint);
    // The common case of a few units a rank (the latency algorithms' one or two, a pipeline's
    // slices sent whole): one value over exactly one segment whose neighbours hold others. It
    // takes the segment's place as it is; the general path below would do the same, slower.
    if (pieces.size() == 1 && at(first).begin == begin && end_of(first, high) == end) {
      const Value& value = pieces.front().value;
      if ((first == 0 || !(at(first - 1).value == value)) &&
          (first + 1 == before || !(at(first + 1).value == value))) {
        slots_[physical(first)].value = value;
        return 0;
      }
    }
    const size_t last = find(end - 1, first);
    const uint64_t last_end = end_of(last, high);
    // Segments [remove_from, remove_to) go; the new ones take their place.
    size_t remove_from = at(first).begin < begin ? first + 1 : first;
    size_t remove_to = last + 1;
    scratch.clear();
    const Segment* previous = remove_from > 0 ? &at(remove_from - 1) : nullptr;
    for (const Segment& piece : pieces) {
      const Value& held = scratch.empty() ? (previous ? previous->value : piece.value)
                                          : scratch.back().value;
      if ((!scratch.empty() || previous) && held == piece.value) continue;
      scratch.push_back(piece);
    }
    // What now ends at `end`, and what follows it.
    const Value tail = scratch.empty() ? previous->value : scratch.back().value;
    if (last_end > end) {
      if (!(at(last).value == tail)) scratch.push_back(Segment{end, at(last).value});
    } else if (remove_to < before && at(remove_to).value == tail) {
      ++remove_to;  // the next segment continues the same value: it merges into the new one
    }
    replace(remove_from, remove_to, scratch);
    return static_cast<ptrdiff_t>(size()) - static_cast<ptrdiff_t>(before);
  }

  size_t capacity_bytes() const { return slots_.capacity() * sizeof(Segment); }

 private:
  size_t physical(size_t i) const { return i < gap_begin_ ? i : i + (gap_end_ - gap_begin_); }

  // Replaces segments [from, to) with `fresh`.
  void replace(size_t from, size_t to, std::span<const Segment> fresh) {
    move_gap(from);
    gap_end_ += to - from;
    if (gap_end_ - gap_begin_ < fresh.size()) grow(fresh.size());
    std::copy(fresh.begin(), fresh.end(), slots_.begin() + static_cast<ptrdiff_t>(gap_begin_));
    gap_begin_ += fresh.size();
  }

  void move_gap(size_t to) {
    if (to < gap_begin_) {
      const size_t n = gap_begin_ - to;
      std::memmove(slots_.data() + gap_end_ - n, slots_.data() + to, n * sizeof(Segment));
      gap_begin_ = to;
      gap_end_ -= n;
    } else if (to > gap_begin_) {
      const size_t n = to - gap_begin_;
      std::memmove(slots_.data() + gap_begin_, slots_.data() + gap_end_, n * sizeof(Segment));
      gap_begin_ += n;
      gap_end_ += n;
    }
  }

  // Room for at least `needed` free slots, keeping the layout before/gap/after.
  void grow(size_t needed) {
    const size_t after = slots_.size() - gap_end_;
    const size_t capacity = std::max(slots_.size() * 2, gap_begin_ + after + needed + 2);
    std::vector<Segment> larger(capacity);
    std::copy(slots_.begin(), slots_.begin() + static_cast<ptrdiff_t>(gap_begin_), larger.begin());
    std::copy(slots_.begin() + static_cast<ptrdiff_t>(gap_end_), slots_.end(),
              larger.end() - static_cast<ptrdiff_t>(after));
    slots_.swap(larger);
    gap_end_ = slots_.size() - after;
  }

  std::vector<Segment> slots_;
  size_t gap_begin_ = 0, gap_end_ = 0;
};

}  // namespace flexplan::ir::detail
