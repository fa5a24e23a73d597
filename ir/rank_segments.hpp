// One rank's interval map for the verifier (internal to the IR library): the values a rank
// holds on a window [low, high) of units, as sorted segments that each start at `begin` and end
// where the next starts (the last at `high`). Adjacent segments always hold different values:
// a write merges with equal neighbours, so a range that a schedule completes becomes one
// segment again.
//
// Stored as a gap buffer: the segments before the gap, a gap of free slots, the segments after
// it. A write moves the gap to where it writes, so writes that walk a rank's buffer in small
// strides (a ring hands on one chunk after another) cost O(1) each instead of shifting the
// whole tail of a vector. The first kInline slots live in the object itself: at a million ranks
// most hold one or two segments, and a heap buffer each would cost a million allocations, their
// page faults and their frees per schedule verified.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
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
    if (!heap_) capacity_ = kInline;
    data()[0] = Segment{low, value};
    gap_begin_ = 1;
    gap_end_ = capacity_;
  }

  size_t size() const { return capacity_ - (gap_end_ - gap_begin_); }
  const Segment& at(size_t i) const { return data()[physical(i)]; }
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

  size_t capacity_bytes() const { return heap_ ? capacity_ * sizeof(Segment) : 0; }

 private:
  static constexpr size_t kInline = 2;

  Segment* data() { return heap_ ? heap_.get() : inline_; }
  const Segment* data() const { return heap_ ? heap_.get() : inline_; }

  size_t physical(size_t i) const { return i < gap_begin_ ? i : i + (gap_end_ - gap_begin_); }

  // Replaces segments [from, to) with `fresh`.
  void replace(size_t from, size_t to, std::span<const Segment> fresh) {
    move_gap(from);
    gap_end_ += to - from;
    if (gap_end_ - gap_begin_ < fresh.size()) grow(fresh.size());
    std::copy(fresh.begin(), fresh.end(), data() + gap_begin_);
    gap_begin_ += fresh.size();
  }

  void move_gap(size_t to) {
    if (to < gap_begin_) {
      const size_t n = gap_begin_ - to;
      std::memmove(data() + gap_end_ - n, data() + to, n * sizeof(Segment));
      gap_begin_ = to;
      gap_end_ -= n;
    } else if (to > gap_begin_) {
      const size_t n = to - gap_begin_;
      std::memmove(data() + gap_begin_, data() + gap_end_, n * sizeof(Segment));
      gap_begin_ += n;
      gap_end_ += n;
    }
  }

  // Room for at least `needed` free slots, keeping the layout before/gap/after.
  void grow(size_t needed) {
    const size_t after = capacity_ - gap_end_;
    const size_t capacity = std::max(capacity_ * 2, gap_begin_ + after + needed + 2);
    std::unique_ptr<Segment[]> larger(new Segment[capacity]);
    const Segment* old = data();
    std::copy(old, old + gap_begin_, larger.get());
    std::copy(old + gap_end_, old + capacity_, larger.get() + capacity - after);
    heap_ = std::move(larger);
    capacity_ = capacity;
    gap_end_ = capacity_ - after;
  }

  // The bookkeeping first and then the first slot: a rank of one segment is read in one line.
  std::unique_ptr<Segment[]> heap_;  // the slots once more than kInline are needed
  size_t capacity_ = 0;              // slots in inline_ or heap_ (0 before the first reset)
  size_t gap_begin_ = 0, gap_end_ = 0;
  Segment inline_[kInline];
};

}  // namespace flexplan::ir::detail
