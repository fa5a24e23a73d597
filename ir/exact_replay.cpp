// Two passes over the ops that touch the unit. The first tracks exact contribution sets as
// P-bit bitsets, immutable and shared, so a broadcast copies a pointer and a rank never
// written needs no bitset; it finds double counting where it happens, and the ranks that end
// incomplete. The second follows one missing contribution alone, one bit per rank, to the
// write that discarded its last copy. Time is O(P/64) words per reduce member and O(1) per
// broadcast member, so even failing plans of 100k+ ranks are explained quickly.
#include "ir/exact_replay.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <memory>
#include <utility>
#include <vector>

#include "ir/op_text.hpp"

namespace flexplan::ir::detail {

namespace {

constexpr size_t kMembersInMessages = 16;

using Bits = std::vector<uint64_t>;

// A fault and where it happened, to report the earliest of several.
struct Fault {
  size_t step, op;
  std::string message;
  bool before(const Fault& other) const {
    return std::pair(step, op) < std::pair(other.step, other.op);
  }
};

// The last write to a rank on the unit, if any.
struct Provenance {
  bool written = false;
  size_t step = 0, op = 0;
};

class ExactReplay {
 public:
  ExactReplay(const Schedule& schedule, int32_t world_size, uint64_t unit)
      : schedule_(schedule),
        world_size_(world_size),
        unit_(unit),
        words_((static_cast<size_t>(world_size) + 63) / 64) {}

  std::optional<std::string> run(int32_t focus_rank, const std::string& focus_range) {
    held_.assign(static_cast<size_t>(world_size_), nullptr);
    provenance_.assign(static_cast<size_t>(world_size_), Provenance{});
    for (size_t s = 0; s < schedule_.steps.size(); ++s) run_step(s);
    // The earliest of a double count and the loss of a contribution no rank ends with; else a
    // rank that ends without some contributions that others hold.
    std::optional<Fault> lost;
    if (const auto absent = contributions_held_nowhere(); !absent.empty())
      lost = trace_loss(absent.front());
    if (double_count_ && (!lost || double_count_->before(*lost))) return double_count_->message;
    if (lost) return lost->message;
    if (auto fault = incomplete(focus_rank, focus_range)) return fault;
    for (int32_t rank = 0; rank < world_size_; ++rank) {
      if (auto fault = incomplete(rank, fmt::format("[{},{})", unit_, unit_ + 1))) return fault;
    }
    return std::nullopt;
  }

 private:
  bool touches(const Op& op) const { return op.begin <= unit_ && unit_ < op.end; }

  bool contains(int32_t owner, int32_t contributor) const {
    const auto& bits = held_[owner];
    if (!bits) return contributor == owner;
    return ((*bits)[contributor / 64] >> (contributor % 64)) & 1;
  }

  std::shared_ptr<const Bits> bits_of(int32_t owner) const {
    if (held_[owner]) return held_[owner];
    auto bits = std::make_shared<Bits>(words_, 0);
    (*bits)[owner / 64] |= uint64_t{1} << (owner % 64);
    return bits;
  }

  // Calls write(rank) for every rank the op writes.
  template <typename Fn>
  static void for_each_written(const Op& op, Fn&& write) {
    if (op.kind == OpKind::Reduce) return write(op.root);
    for (int32_t member : op.group) {
      if (member != op.root) write(member);
    }
  }

  // ---- first pass: exact sets (a contribution counted twice is noted, then kept once)
  void run_step(size_t step_index) {
    const Step& step = schedule_.steps[step_index];
    std::vector<std::pair<size_t, std::shared_ptr<const Bits>>> results;
    for (size_t o = 0; o < step.ops.size(); ++o) {
      const Op& op = step.ops[o];
      if (!touches(op)) continue;
      if (op.kind == OpKind::Broadcast) {
        results.emplace_back(o, bits_of(op.root));
        continue;
      }
      auto sum = std::make_shared<Bits>(words_, 0);
      auto add_word = [&](size_t w, uint64_t word) {
        const uint64_t twice = (*sum)[w] & word;
        if (twice && !double_count_) {
          double_count_ =
              double_count(step_index, o, static_cast<int32_t>(w * 64 + std::countr_zero(twice)));
        }
        (*sum)[w] |= word;
      };
      for (int32_t member : op.group) {
        if (const auto& add = held_[member]) {
          for (size_t w = 0; w < words_; ++w) add_word(w, (*add)[w]);
        } else {
          add_word(member / 64, uint64_t{1} << (member % 64));  // its own contribution only
        }
      }
      results.emplace_back(o, std::move(sum));
    }
    for (const auto& [op_index, bits] : results) {
      for_each_written(step.ops[op_index], [&](int32_t rank) {
        held_[rank] = bits;
        provenance_[rank] = Provenance{true, step_index, op_index};
      });
    }
  }

  Fault double_count(size_t step_index, size_t op_index, int32_t contributor) const {
    const Op& op = schedule_.steps[step_index].ops[op_index];
    std::vector<int32_t> bringers;
    for (int32_t member : op.group) {
      if (contains(member, contributor)) bringers.push_back(member);
    }
    return Fault{
        step_index, op_index,
        fmt::format("step {} op {} ({}): rank {} would hold the contribution of rank {} twice on "
                    "unit {}, brought by group members {}",
                    step_index, op_index, format_op(op, kMembersInMessages), op.root, contributor,
                    unit_, format_ranks(bringers))};
  }

  // Contributors in no rank's final value: the union of the distinct values, complemented.
  std::vector<int32_t> contributions_held_nowhere() const {
    Bits everywhere(words_, 0);
    std::vector<const Bits*> values;  // distinct: a broadcast shares one value among many ranks
    for (int32_t rank = 0; rank < world_size_; ++rank) {
      if (held_[rank])
        values.push_back(held_[rank].get());
      else
        everywhere[rank / 64] |= uint64_t{1} << (rank % 64);
    }
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    for (const Bits* bits : values) {
      for (size_t w = 0; w < words_; ++w) everywhere[w] |= (*bits)[w];
    }
    std::vector<int32_t> absent;
    for (int32_t c = 0; c < world_size_; ++c) {
      if (!((everywhere[c / 64] >> (c % 64)) & 1)) absent.push_back(c);
    }
    return absent;
  }

  std::optional<std::string> incomplete(int32_t rank, const std::string& range) const {
    if (rank < 0 || rank >= world_size_) return std::nullopt;
    std::vector<int32_t> missing;
    for (int32_t c = 0; c < world_size_; ++c) {
      if (!contains(rank, c)) missing.push_back(c);
    }
    if (missing.empty()) return std::nullopt;
    const Provenance& last = provenance_[rank];
    return fmt::format(
        "after the last step rank {} holds {} of {} contributions on units {}: it lacks the "
        "contribution of {} (checked exactly on unit {}); its value there {}",
        rank, world_size_ - static_cast<int32_t>(missing.size()), world_size_, range,
        format_ranks(missing), unit_,
        last.written ? "has not changed " + since(last) : "was never written");
  }

  // "since the start" or "since step 2 op 1 (reduce ...)".
  std::string since(const Provenance& write) const {
    if (!write.written) return "since the start";
    return fmt::format("since step {} op {} ({})", write.step, write.op,
                       format_op(schedule_.steps[write.step].ops[write.op], kMembersInMessages));
  }

  // ---- second pass: one contribution, one bit per rank
  // The write after which no rank holds `contributor` on the unit any more, if there is one.
  std::optional<Fault> trace_loss(int32_t contributor) const {
    std::vector<char> holds(static_cast<size_t>(world_size_), 0);
    std::vector<Provenance> provenance(static_cast<size_t>(world_size_));
    holds[contributor] = 1;
    int64_t holders = 1;
    for (size_t s = 0; s < schedule_.steps.size(); ++s) {
      const Step& step = schedule_.steps[s];
      std::vector<std::pair<size_t, char>> results;
      for (size_t o = 0; o < step.ops.size(); ++o) {
        const Op& op = step.ops[o];
        if (!touches(op)) continue;
        char result = 0;
        if (op.kind == OpKind::Broadcast)
          result = holds[op.root];
        else
          for (int32_t member : op.group) result |= holds[member];
        results.emplace_back(o, result);
      }
      struct Discard {
        size_t op;
        int32_t rank;
        Provenance previous;
      };
      std::optional<Discard> last_discard;
      for (const auto& [o, result] : results) {
        for_each_written(step.ops[o], [&, o = o, result = result](int32_t rank) {
          if (holds[rank] && !result) last_discard = Discard{o, rank, provenance[rank]};
          holders += result - holds[rank];
          holds[rank] = result;
          provenance[rank] = Provenance{true, s, o};
        });
      }
      if (holders == 0) {
        const Discard& d = *last_discard;
        return Fault{
            s, d.op,
            fmt::format("step {} op {} ({}): writing rank {} on unit {} discards the last copy of "
                        "the contribution of rank {}, held there {}, so no rank can end with it",
                        s, d.op, format_op(step.ops[d.op], kMembersInMessages), d.rank, unit_,
                        contributor, since(d.previous))};
      }
    }
    return std::nullopt;
  }

  const Schedule& schedule_;
  const int32_t world_size_;
  const uint64_t unit_;
  const size_t words_;
  std::vector<std::shared_ptr<const Bits>> held_;  // null: only the rank's own contribution
  std::vector<Provenance> provenance_;
  std::optional<Fault> double_count_;  // the first
};

}  // namespace

std::optional<std::string> replay_unit(const Schedule& schedule, int32_t world_size, uint64_t unit,
                                       int32_t focus_rank, const std::string& focus_range) {
  return ExactReplay(schedule, world_size, unit).run(focus_rank, focus_range);
}

}  // namespace flexplan::ir::detail
