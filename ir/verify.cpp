// check_structure, verify_schedule, check_plan_fields and verify_plan.
#include "ir/verify.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

#include "ir/collective_contract.hpp"
#include "ir/exact_replay.hpp"
#include "ir/op_text.hpp"
#include "ir/pipeline_form.hpp"
#include "ir/summary_execution.hpp"
#include "ir/utf8.hpp"

namespace flexplan::ir {

namespace {

constexpr size_t kMembersInMessages = 16;

[[noreturn]] void fail(const std::string& label, const std::string& what) {
  throw VerifyError(label + ": " + what);
}

// Finds a rank listed twice in a group. With a world no larger than a few times the schedule,
// one mark per rank (the index of the last group that held it) makes this O(group); otherwise
// small groups are compared pairwise and large ones sorted, without memory sized by the world.
class RepeatFinder {
 public:
  RepeatFinder(int32_t world_size, size_t schedule_size) {
    if (static_cast<size_t>(world_size) <= 4 * schedule_size + 4096)
      marks_.assign(static_cast<size_t>(world_size), 0);
  }

  // `group`'s members must already be in [0, world_size).
  std::optional<int32_t> find(std::span<const int32_t> group) {
    if (!marks_.empty()) {
      if (++stamp_ == 0) {  // wrapped around: forget every mark
        std::fill(marks_.begin(), marks_.end(), 0);
        stamp_ = 1;
      }
      for (int32_t member : group) {
        uint32_t& mark = marks_[static_cast<size_t>(member)];
        if (mark == stamp_) return member;
        mark = stamp_;
      }
      return std::nullopt;
    }
    constexpr size_t kPairwiseLimit = 16;
    if (group.size() <= kPairwiseLimit) {
      for (size_t i = 1; i < group.size(); ++i) {
        for (size_t j = 0; j < i; ++j) {
          if (group[i] == group[j]) return group[i];
        }
      }
      return std::nullopt;
    }
    sorted_.assign(group.begin(), group.end());
    std::sort(sorted_.begin(), sorted_.end());
    const auto twice = std::adjacent_find(sorted_.begin(), sorted_.end());
    if (twice == sorted_.end()) return std::nullopt;
    return *twice;
  }

 private:
  std::vector<uint32_t> marks_;
  uint32_t stamp_ = 0;
  std::vector<int32_t> sorted_;
};

std::string schedule_label(const Schedule& schedule) {
  return fmt::format("schedule {}", schedule.algorithm.empty() ? "(unnamed)" : schedule.algorithm);
}

std::string byte_range(const Schedule& schedule) {
  return schedule.max_bytes ? fmt::format("[{},{})", schedule.min_bytes, *schedule.max_bytes)
                            : fmt::format("[{},inf)", schedule.min_bytes);
}

// check_structure's checks of op `o` of step `s` of a schedule of `units` units.
void check_op(const Op& op, uint64_t units, int32_t world_size, const std::string& label, size_t s, size_t o,
              RepeatFinder& repeats) {
  auto where = [&] { return fmt::format("step {} op {} ({})", s, o, format_op(op, kMembersInMessages)); };
  if (op.kind != OpKind::Reduce && op.kind != OpKind::Broadcast) {
    fail(label, fmt::format("step {} op {}: invalid op kind", s, o));
  }
  if (op.begin >= op.end) fail(label, where() + ": empty range");
  if (op.end > units) {
    fail(label, fmt::format("{}: end {} exceeds the schedule's {} units", where(), op.end, units));
  }
  if (op.root < 0 || op.root >= world_size) {
    fail(label, fmt::format("{}: root {} is not among the {} ranks", where(), op.root, world_size));
  }
  if (op.group.empty()) fail(label, where() + ": empty group");
  for (int32_t member : op.group) {
    if (member < 0 || member >= world_size) {
      fail(label, fmt::format("{}: group member {} is not among the {} ranks", where(), member, world_size));
    }
  }
  if (const auto twice = repeats.find(op.group)) {
    fail(label, fmt::format("{}: rank {} appears twice in the group", where(), *twice));
  }
  if (op.kind == OpKind::Reduce && op.shape == OpShape::Star) {
    const uint64_t sources = op.group.size() - (op.root_in_group() ? 1 : 0);
    if (sources > kMaxStarSources)
      fail(label, fmt::format("{}: a star reduce of {} sources; the runtime's tags tell at most {} apart "
                              "(make it a tree of stars, or a chain)",
                              where(), sources, kMaxStarSources));
  }
}

// Checks the schedule's fields and the ops whose index, counting through all steps in order,
// is in [first_op, last_op).
// The fields of the schedule itself, not of its steps.
void check_schedule_fields(const Schedule& schedule, int32_t world_size, const std::string& label) {
  if (world_size < 1) fail(label, fmt::format("world size {} must be at least 1", world_size));
  if (schedule.units == 0) fail(label, "units must be at least 1");
  if (schedule.max_bytes && *schedule.max_bytes <= schedule.min_bytes) {
    fail(label, fmt::format("message size range {} is empty", byte_range(schedule)));
  }
  if (const std::string fault = contract_fault(schedule, world_size); !fault.empty())
    fail(label, fault);
}

void check_structure_labeled(const Schedule& schedule, int32_t world_size,
                             const std::string& label, size_t first_op = 0,
                             size_t last_op = SIZE_MAX) {
  check_schedule_fields(schedule, world_size, label);
  // The size of what is checked (a slice's share, not the whole schedule), which decides
  // whether marks sized by the world pay off.
  size_t size = 0, counted = 0;
  for (const Step& step : schedule.steps) {
    if (counted >= last_op) break;
    if (counted + step.ops.size() <= first_op) {
      counted += step.ops.size();
      continue;
    }
    for (const Op& op : step.ops) {
      if (counted >= first_op && counted < last_op) size += 1 + op.group.size();
      ++counted;
    }
  }
  RepeatFinder repeats(world_size, size);
  size_t index = 0;  // of the op, through all steps
  for (size_t s = 0; s < schedule.steps.size(); ++s) {
    const Step& step = schedule.steps[s];
    if (static_cast<size_t>(step.phase) > static_cast<size_t>(Phase::Broadcast)) {
      fail(label, fmt::format("step {}: invalid phase", s));
    }
    if (index + step.ops.size() <= first_op || index >= last_op) {
      index += step.ops.size();
      continue;
    }
    for (size_t o = 0; o < step.ops.size(); ++o, ++index) {
      if (index < first_op || index >= last_op) continue;
      check_op(step.ops[o], schedule.units, world_size, label, s, o, repeats);
    }
  }
}

// A rank that must end with data from others but that no op writes, or whose input the result
// needs but that takes part in no op: the first such rank and why, from the ops alone. Every
// collective needs at least P - 1 ranks in its ops, so checking that first also bounds the
// verifier's memory by the plan's size, whatever world size the plan claims.
std::optional<std::string> first_rank_left_out(const Schedule& schedule, int32_t world_size) {
  if (world_size == 1) return std::nullopt;
  const Collective collective = schedule.collective;
  uint64_t owned_units = 0;  // an all-gather's units that some shard holds
  if (collective == Collective::AllGather) {
    if (schedule.shards.empty()) owned_units = schedule.units;
    for (const UnitRange& shard : schedule.shards) owned_units += shard.end - shard.begin;
  }
  // What the rank must end with that only a write can bring, or null.
  const auto lacks = [&](int32_t rank) -> const char* {
    switch (collective) {
      case Collective::AllReduce:
        return "the other ranks' contributions";
      case Collective::ReduceScatter: {
        const UnitRange shard = shard_of(schedule, world_size, rank);
        return shard.begin < shard.end ? "the other ranks' contributions on its shard" : nullptr;
      }
      case Collective::Reduce:
        return rank == schedule.root ? "the other ranks' contributions (it is the root)" : nullptr;
      case Collective::AllGather: {
        const UnitRange shard = shard_of(schedule, world_size, rank);
        return owned_units > shard.end - shard.begin ? "the other ranks' shards" : nullptr;
      }
      case Collective::Broadcast:
        return rank != schedule.root ? "the root's data" : nullptr;
    }
    return nullptr;
  };
  const auto never_written = [&](int32_t rank) {
    return fmt::format("rank {} is never written by any op, so it cannot end with {}", rank,
                       lacks(rank));
  };
  size_t mentions = 0;
  for (const Step& step : schedule.steps)
    for (const Op& op : step.ops) mentions += 1 + op.group.size();
  if (mentions + 1 < static_cast<size_t>(world_size)) {
    // Some rank other than the one that may stay out is in no op. The ranks the ops write and
    // name, sorted, find it without a map sized by the world.
    std::vector<int32_t> written, named;
    for (const Step& step : schedule.steps)
      for (const Op& op : step.ops) {
        named.push_back(op.root);
        named.insert(named.end(), op.group.begin(), op.group.end());
        if (op.kind == OpKind::Reduce)
          written.push_back(op.root);
        else
          for (int32_t member : op.group)
            if (member != op.root) written.push_back(member);
      }
    for (auto* ranks : {&written, &named}) {
      std::sort(ranks->begin(), ranks->end());
      ranks->erase(std::unique(ranks->begin(), ranks->end()), ranks->end());
    }
    // The first ranks outside a sorted list, in order.
    const auto gaps = [](const std::vector<int32_t>& ranks, auto&& visit) {
      int32_t next = 0;
      for (size_t i = 0; i <= ranks.size(); ++i) {
        const int32_t until = i < ranks.size() ? ranks[i] : next + 2;
        for (; next < until; ++next)
          if (visit(next)) return;
        next = until + 1;
      }
    };
    std::optional<std::string> found;
    gaps(written, [&](int32_t rank) {
      if (rank < world_size && lacks(rank)) found = never_written(rank);
      return true;  // the first unwritten rank decides; the others are exempt by the contract
    });
    if (found) return found;
    gaps(named, [&](int32_t rank) {
      if (has_root(collective) && rank == schedule.root) return false;
      found = fmt::format("rank {} takes part in no op: the schedule's {} ops name at most {} of "
                          "the {} ranks",
                          rank, to_string(collective), mentions, world_size);
      return true;
    });
    return found;
  }
  std::vector<bool> written(static_cast<size_t>(world_size), false);
  std::vector<bool> touched(static_cast<size_t>(world_size), false);
  for (const Step& step : schedule.steps) {
    for (const Op& op : step.ops) {
      touched[op.root] = true;
      for (int32_t member : op.group) touched[member] = true;
      if (op.kind == OpKind::Reduce)
        written[op.root] = true;
      else
        for (int32_t member : op.group)
          if (member != op.root) written[member] = true;
    }
  }
  bool sum_needed = false;  // some rank must end with every input
  for (int32_t rank = 0; rank < world_size; ++rank) {
    if (!lacks(rank)) continue;
    if (combines(collective)) sum_needed = true;
    if (!written[rank]) return never_written(rank);
  }
  if (sum_needed)
    for (int32_t rank = 0; rank < world_size; ++rank)
      if (!touched[rank])
        return fmt::format("rank {} takes part in no op, so its input cannot reach the sum", rank);
  return std::nullopt;
}

// Runs the schedule on units [low, high) and throws the exact explanation of the first fault.
void execute_and_explain(const Schedule& schedule, int32_t world_size, uint64_t low,
                         uint64_t high, const std::string& label) {
  const auto fault = detail::execute_summaries(schedule, world_size, low, high);
  if (!fault) return;
  if (fault->kind == detail::SummaryFault::Kind::WriteConflict) fail(label, fault->message);
  // The exact replay starts every rank with its own input on every unit, as the combining
  // collectives do; for the copying ones the summary's words name what was held and what due.
  if (!combines(schedule.collective)) fail(label, fault->message);
  const auto exact =
      detail::replay_unit(schedule, world_size, fault->unit, fault->rank,
                          fmt::format("[{},{})", fault->range_begin, fault->range_end));
  // The exact replay always explains a summary fault; the summary's own words are a fallback.
  fail(label, exact ? *exact : fault->message);
}

// A pipeline's base computes what the pipeline does only where the contract is the same on every
// unit (pipeline_form.hpp): the slices of a sharded collective would cut across its shards.
bool base_stands_for_pipeline(const Schedule& schedule) {
  return !has_shards(schedule.collective);
}

void verify_whole_schedule(const Schedule& schedule, int32_t world_size,
                           const std::string& label) {
  check_structure_labeled(schedule, world_size, label);
  if (const auto why = first_rank_left_out(schedule, world_size)) fail(label, *why);
  execute_and_explain(schedule, world_size, 0, schedule.units, label);
}

// A pipeline is right exactly when its base is (pipeline_form.hpp): the base is checked, and
// the whole pipeline only to explain a fault in its own words.
void verify_schedule_labeled(const Schedule& schedule, int32_t world_size,
                             const std::string& label) {
  if (schedule.slices != 1) {  // compact: its steps are the base's
    try {
      verify_whole_schedule(schedule, world_size, label);
      return;
    } catch (const VerifyError&) {
      // A large expansion is not built to explain the fault: the base's words stand.
      if (expanded_op_count(schedule) > kMaxExplainedExpansionOps) throw;
    }
    verify_whole_schedule(materialize(schedule), world_size, label);
    return;
  }
  if (const auto pipeline = base_stands_for_pipeline(schedule) ? pipeline_base(schedule)
                                                                : std::nullopt) {
    try {
      verify_whole_schedule(pipeline->base, world_size, label);
      return;
    } catch (const VerifyError&) {
    }
  }
  verify_whole_schedule(schedule, world_size, label);
}

// Every message size, 0 bytes and up, has a schedule for each collective (and root) the plan
// holds at all: the runtime picks one for any size it is given. `order` sorts the schedules by
// collective, root, then min_bytes (and they do not overlap).
void check_every_size_served(const Plan& plan, const std::vector<size_t>& order) {
  if (plan.schedules.empty()) fail("plan", "the plan has no schedule");
  auto name = [&](size_t i) { return ir::schedule_label(plan, i); };
  auto what = [&](const Schedule& schedule) {
    return has_root(schedule.collective)
               ? fmt::format("{} (root {})", to_string(schedule.collective), schedule.root)
               : std::string(to_string(schedule.collective));
  };
  for (size_t k = 0; k < order.size();) {
    const Schedule& first = plan.schedules[order[k]];
    uint64_t served_to = 0;          // sizes below this are served
    std::optional<size_t> previous;  // the schedule that serves up to served_to
    auto gap = [&](uint64_t begin, std::optional<uint64_t> end, const std::string& why) {
      fail("plan", fmt::format("no {} schedule serves messages of [{},{}) bytes: {}", what(first),
                               begin, end ? std::to_string(*end) : "inf", why));
    };
    bool unbounded = false;
    for (; k < order.size(); ++k) {
      const Schedule& schedule = plan.schedules[order[k]];
      if (schedule.collective != first.collective || schedule.root != first.root) break;
      if (unbounded) continue;  // overlaps were reported by the caller
      if (schedule.min_bytes > served_to) {
        gap(served_to, schedule.min_bytes,
            previous ? fmt::format("{} ends at {} and {} starts at {}", name(*previous), served_to,
                                   name(order[k]), schedule.min_bytes)
                     : fmt::format("{} starts at {}", name(order[k]), schedule.min_bytes));
      }
      if (!schedule.max_bytes) {
        unbounded = true;  // every larger size is served
        continue;
      }
      served_to = *schedule.max_bytes;
      previous = order[k];
    }
    if (!unbounded) gap(served_to, std::nullopt, fmt::format("{} ends at {}", name(*previous), served_to));
  }
}

// Strings must be UTF-8, so that every printed form (text, JSON) can hold them.
void check_utf8(const std::string& text, const std::string& what) {
  if (const auto at = detail::invalid_utf8_at(text))
    fail("plan", fmt::format("{} is not valid UTF-8 (byte {:#04x} at offset {})", what,
                             static_cast<uint8_t>(text[*at]), *at));
}

bool is_hash_hex(const std::string& text) {
  return text.size() == 16 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

}  // namespace

void check_structure(const Schedule& schedule, int32_t world_size) {
  check_structure_labeled(schedule, world_size, schedule_label(schedule));
}

void verify_schedule(const Schedule& schedule, int32_t world_size) {
  verify_schedule_labeled(schedule, world_size, schedule_label(schedule));
}

void verify_schedule(const Schedule& schedule, int32_t world_size, const std::string& label) {
  verify_schedule_labeled(schedule, world_size, label);
}

std::string schedule_label(const Plan& plan, size_t index) {
  return fmt::format("schedule {} ({})", index, plan.schedules.at(index).algorithm);
}

void check_plan_fields(const Plan& plan) {
  if (plan.world_size < 1)
    fail("plan", fmt::format("world size {} must be at least 1", plan.world_size));
  if (!plan.rank_names.empty() && plan.rank_names.size() != static_cast<size_t>(plan.world_size)) {
    fail("plan", fmt::format("{} rank names for a world size of {} (give none or one per rank)",
                             plan.rank_names.size(), plan.world_size));
  }
  check_utf8(plan.topology_name, "the topology name");
  for (size_t rank = 0; rank < plan.rank_names.size(); ++rank)
    check_utf8(plan.rank_names[rank], fmt::format("rank name {}", rank));
  for (size_t i = 0; i < plan.schedules.size(); ++i)
    check_utf8(plan.schedules[i].algorithm, fmt::format("the algorithm name of schedule {}", i));
  if (!plan.topology_hash.empty() && !is_hash_hex(plan.topology_hash)) {
    fail("plan",
         fmt::format("topology hash '{}' is not 16 lowercase hex digits", plan.topology_hash));
  }
  // Within one collective, sorted by min_bytes, each schedule must end before the next begins.
  std::vector<size_t> order(plan.schedules.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Schedule &x = plan.schedules[a], &y = plan.schedules[b];
    return std::tuple(x.collective, x.root, x.min_bytes) <
           std::tuple(y.collective, y.root, y.min_bytes);
  });
  for (size_t k = 1; k < order.size(); ++k) {
    const Schedule &prev = plan.schedules[order[k - 1]], &next = plan.schedules[order[k]];
    if (prev.collective != next.collective || prev.root != next.root) continue;
    if (!prev.max_bytes || *prev.max_bytes > next.min_bytes) {
      fail("plan",
           fmt::format("schedules {} ({}, bytes {}) and {} ({}, bytes {}) both serve {} "
                       "messages of {} bytes",
                       order[k - 1], prev.algorithm, byte_range(prev), order[k], next.algorithm,
                       byte_range(next), to_string(next.collective), next.min_bytes));
    }
  }
  check_every_size_served(plan, order);
}

namespace {

// For each schedule, an earlier one holding the same collective, units and steps (the
// planner's pipelines of one base do), or npos: verifying that one verified these steps, which
// are right exactly when this schedule is, whether it holds them whole or as a compact
// pipeline's base. Its own fields (the byte range) are still checked. Steps are compared in
// full only where a hash of them agrees, so the cost is one pass over the plan.
constexpr size_t kNoEarlier = SIZE_MAX;

std::vector<size_t> repeated_schedules(const Plan& plan) {
  const auto mix = [](uint64_t hash, uint64_t value) {
    return (hash ^ value) * 0x100000001b3ull;  // FNV-1a, one 64-bit value at a time
  };
  std::vector<size_t> earlier(plan.schedules.size(), kNoEarlier);
  const auto same_steps_of = [&](const Schedule& a, const Schedule& b) {
    return a.collective == b.collective && a.units == b.units && a.root == b.root &&
           a.shards == b.shards;
  };
  // Steps of different counts or op counts differ: a schedule is hashed only where an earlier
  // one has as many of both (a plan's largest schedules are usually alone in theirs).
  std::vector<std::pair<size_t, size_t>> counts;
  for (const Schedule& schedule : plan.schedules) {
    size_t ops = 0;
    for (const Step& step : schedule.steps) ops += step.ops.size();
    counts.emplace_back(schedule.steps.size(), ops);
  }
  std::vector<std::optional<uint64_t>> hashes(plan.schedules.size());
  const auto hash_of = [&](size_t i) {
    if (hashes[i]) return *hashes[i];
    const Schedule& schedule = plan.schedules[i];
    uint64_t hash = mix(mix(0xcbf29ce484222325ull, schedule.units), static_cast<uint64_t>(schedule.collective));
    for (const Step& step : schedule.steps) {
      hash = mix(mix(mix(hash, static_cast<uint64_t>(step.phase)), static_cast<uint64_t>(step.level)), step.ops.size());
      for (const Op& op : step.ops) {
        hash = mix(mix(mix(hash, op.begin), op.end), static_cast<uint64_t>(op.root));
        hash = mix(mix(hash, static_cast<uint64_t>(op.kind) * 2 + static_cast<uint64_t>(op.shape)), op.group.size());
        for (const int32_t member : op.group) hash = mix(hash, static_cast<uint64_t>(member));
      }
    }
    hashes[i] = hash;
    return hash;
  };
  for (size_t i = 0; i < plan.schedules.size(); ++i) {
    const Schedule& schedule = plan.schedules[i];
    // Steps held once in memory (a decoded named copy, the planner's pipelines of one base)
    // need no hash and no comparison.
    for (size_t j = 0; j < i && earlier[i] == kNoEarlier; ++j)
      if (earlier[j] == kNoEarlier && schedule.steps.shares(plan.schedules[j].steps) &&
          same_steps_of(schedule, plan.schedules[j]))
        earlier[i] = j;
    for (size_t j = 0; j < i && earlier[i] == kNoEarlier; ++j) {
      const Schedule& other = plan.schedules[j];
      if (earlier[j] == kNoEarlier && counts[j] == counts[i] && same_steps_of(other, schedule) &&
          hash_of(j) == hash_of(i) && other.steps == schedule.steps)
        earlier[i] = j;
    }
  }
  return earlier;
}

// The transpose of a verified copying schedule, proven without executing it.
//
// Let `copies` be a verified all-gather over equal shards, or a verified broadcast, in which
// every op's root is in its group, every rank other than a unit's owner (the root, for a
// broadcast) receives each unit once and the owner never (the units received add up to
// U (P - 1), and each of those ranks receives each unit at least once to end with it), and no
// two ops of a step have the same root on overlapping units. Each rank then gets unit u from one
// op, whose root held u when the step began (its members receive nothing else, so they would
// otherwise end without it); the rank sends u only in later steps. The transpose
// (transpose_copies: steps reversed, each broadcast a reduce to the same root over the same
// group) runs those edges backwards: a rank's reduce into its sender comes after every reduce
// into it from the ranks it sent to, and it is read by no other reduce, so the owner ends with
// each rank's input once: the reduce-scatter (reduce) over the same shards (root). Its writes
// are the copies' sends, one per root and unit in a step: no write conflict.
bool transposes_to(const Schedule& combining, const Schedule& copies) {
  const bool pair = (combining.collective == Collective::ReduceScatter &&
                     copies.collective == Collective::AllGather) ||
                    (combining.collective == Collective::Reduce &&
                     copies.collective == Collective::Broadcast);
  if (!pair || combining.units != copies.units || combining.root != copies.root ||
      !combining.shards.empty() || !copies.shards.empty() ||
      // A sharded pipeline is not right exactly when its base is (base_stands_for_pipeline).
      (has_shards(copies.collective) && (copies.slices != 1 || combining.slices != 1)) ||
      combining.steps.size() != copies.steps.size())
    return false;
  const size_t n = copies.steps.size();
  for (size_t s = 0; s < n; ++s) {
    const Step& back = combining.steps[s];
    const Step& forth = copies.steps[n - 1 - s];
    const Phase mirrored = forth.phase == Phase::AllGather   ? Phase::ReduceScatter
                           : forth.phase == Phase::Broadcast ? Phase::Reduce
                                                             : forth.phase;
    if (back.phase != mirrored || back.level != forth.level || back.ops.size() != forth.ops.size())
      return false;
    for (size_t o = 0; o < back.ops.size(); ++o) {
      const Op &a = back.ops[o], &b = forth.ops[o];
      if (a.kind != OpKind::Reduce || b.kind != OpKind::Broadcast || a.begin != b.begin ||
          a.end != b.end || a.root != b.root || a.shape != b.shape ||
          a.group.size() != b.group.size() ||
          !std::equal(a.group.begin(), a.group.end(), std::make_reverse_iterator(b.group.end())))
        return false;
    }
  }
  return true;
}

// The conditions on a verified copying schedule under which its transpose is proven
// (transposes_to's comment).
bool receives_each_unit_once(const Schedule& copies, int32_t world_size) {
  unsigned __int128 received = 0;
  // Per root, the end of its latest send in this step: sends in unit order (as the planner
  // writes them) are checked in O(1); a step with any other order is sorted.
  std::vector<uint64_t> sent_to(static_cast<size_t>(world_size), 0);
  std::vector<uint32_t> stamp(static_cast<size_t>(world_size), 0);
  std::vector<std::tuple<int32_t, uint64_t, uint64_t>> sends;
  uint32_t now = 0;
  for (const Step& step : copies.steps) {
    ++now;
    bool in_order = true;
    for (const Op& op : step.ops) {
      if (!op.root_in_group()) return false;
      received += static_cast<unsigned __int128>(op.end - op.begin) * (op.group.size() - 1);
      const auto root = static_cast<size_t>(op.root);
      if (stamp[root] != now) {
        stamp[root] = now;
        sent_to[root] = op.end;
        continue;
      }
      if (op.begin < sent_to[root]) in_order = false;
      sent_to[root] = std::max(sent_to[root], op.end);
    }
    if (in_order) continue;
    sends.clear();
    for (const Op& op : step.ops) sends.emplace_back(op.root, op.begin, op.end);
    std::sort(sends.begin(), sends.end());
    for (size_t i = 1; i < sends.size(); ++i)
      if (std::get<0>(sends[i]) == std::get<0>(sends[i - 1]) &&
          std::get<1>(sends[i]) < std::get<2>(sends[i - 1]))
        return false;
  }
  return received == static_cast<unsigned __int128>(copies.units) *
                         static_cast<uint64_t>(world_size - 1);
}

}  // namespace

bool VerifiedSchedules::verify_and_keep(const Schedule& schedule, int32_t world_size) {
  try {
    verify_schedule(schedule, world_size);
  } catch (const std::exception&) {
    return false;  // verify_plan runs it again and reports it as the plan's
  }
  const std::lock_guard<std::mutex> hold(lock_);
  kept_.emplace_back(schedule, world_size);  // shares its steps
  return true;
}

bool VerifiedSchedules::holds(const Schedule& schedule, int32_t world_size) const {
  const std::lock_guard<std::mutex> hold(lock_);
  return std::any_of(kept_.begin(), kept_.end(), [&](const auto& kept) {
    return kept.second == world_size && kept.first == schedule;
  });
}

void verify_plan(const Plan& plan, const VerifiedSchedules* already) {
  check_plan_fields(plan);
  const std::vector<size_t> repeated = repeated_schedules(plan);
  // A reduce-scatter or reduce that is the transpose of an all-gather or broadcast of the plan
  // is proven through it (transposes_to) where that one verifies and meets the conditions;
  // otherwise, or where the copies fail, it is executed as any schedule is.
  std::vector<char> verified(plan.schedules.size(), 0);
  if (already != nullptr)
    for (size_t i = 0; i < plan.schedules.size(); ++i)
      if (repeated[i] == kNoEarlier && already->holds(plan.schedules[i], plan.world_size)) {
        check_schedule_fields(plan.schedules[i], plan.world_size, schedule_label(plan, i));
        verified[i] = 1;
      }
  const auto proven_as_transpose = [&](size_t i) {
    const Schedule& schedule = plan.schedules[i];
    if (!combines(schedule.collective) || schedule.collective == Collective::AllReduce) return false;
    for (size_t j = 0; j < plan.schedules.size(); ++j) {
      if (!transposes_to(schedule, plan.schedules[j])) continue;
      // A pipeline and its base are right together: the one holding the steps first is verified.
      const size_t k = repeated[j] == kNoEarlier ? j : repeated[j];
      if (!verified[k]) {
        try {
          verify_schedule_labeled(plan.schedules[k], plan.world_size, schedule_label(plan, k));
        } catch (const VerifyError&) {
          return false;  // reported in its own turn
        }
        verified[k] = 1;
      }
      if (!receives_each_unit_once(plan.schedules[j], plan.world_size)) return false;
      check_schedule_fields(schedule, plan.world_size, schedule_label(plan, i));
      return true;
    }
    return false;
  };
  for (size_t i = 0; i < plan.schedules.size(); ++i) {
    if (repeated[i] != kNoEarlier) {
      check_schedule_fields(plan.schedules[i], plan.world_size, schedule_label(plan, i));
      continue;
    }
    if (verified[i] || proven_as_transpose(i)) continue;
    verify_schedule_labeled(plan.schedules[i], plan.world_size, schedule_label(plan, i));
    verified[i] = 1;
  }
}

namespace {

// The slice's share of the structure checks is its slice of the ops; the ops whose range meets
// its units, which its execution reads, it checks for ranks beyond the world here (the rest of
// their structure cannot make the execution misbehave, and some other slice checks it).
void check_ranks_touching(const Schedule& schedule, int32_t world_size, UnitRange units,
                          const std::string& label) {
  for (size_t s = 0; s < schedule.steps.size(); ++s) {
    const Step& step = schedule.steps[s];
    for (size_t o = 0; o < step.ops.size(); ++o) {
      const Op& op = step.ops[o];
      if (op.end <= units.begin || op.begin >= units.end) continue;
      bool outside = op.root < 0 || op.root >= world_size;
      for (int32_t member : op.group) outside = outside || member < 0 || member >= world_size;
      if (!outside) continue;
      size_t first = 0;
      for (size_t k = 0; k < s; ++k) first += schedule.steps[k].ops.size();
      check_structure_labeled(schedule, world_size, label, first + o, first + o + 1);
    }
  }
}

size_t op_count(const Schedule& schedule) {
  size_t ops = 0;
  for (const Step& step : schedule.steps) ops += step.ops.size();
  return ops;
}

void verify_slice(const Schedule& schedule, int32_t world_size, const std::string& label,
                  int32_t slice, int32_t slices) {
  const UnitRange ops = unit_slice(op_count(schedule), slice, slices);
  check_structure_labeled(schedule, world_size, label, ops.begin, ops.end);
  const UnitRange range = unit_slice(schedule.units, slice, slices);
  check_ranks_touching(schedule, world_size, range, label);
  execute_and_explain(schedule, world_size, range.begin, range.end, label);
}

}  // namespace

UnitRange unit_slice(uint64_t units, int32_t slice, int32_t slices) {
  auto cut = [&](int32_t k) {
    return static_cast<uint64_t>(static_cast<unsigned __int128>(units) * static_cast<uint32_t>(k) /
                                 static_cast<uint32_t>(slices));
  };
  return {cut(slice), cut(slice + 1)};
}

int32_t schedule_slice(size_t index, size_t schedules, int32_t part, int32_t slices) {
  if (slices < 1 || part < 0 || part >= slices || index >= std::max<size_t>(schedules, 1))
    throw std::invalid_argument(fmt::format("part {} of {} of schedule {} of {} does not exist",
                                            part, slices, index, schedules));
  const uint64_t rotation =
      static_cast<uint64_t>(static_cast<unsigned __int128>(index) * static_cast<uint32_t>(slices) /
                            std::max<size_t>(schedules, 1));
  return static_cast<int32_t>((static_cast<uint64_t>(part) + rotation) %
                              static_cast<uint32_t>(slices));
}

void verify_plan_slice(const Plan& plan, int32_t part, int32_t slices) {
  if (slices < 1 || part < 0 || part >= slices)
    throw std::invalid_argument(fmt::format("slice {} of {} does not exist", part, slices));
  check_plan_fields(plan);
  const std::vector<size_t> repeated = repeated_schedules(plan);
  for (size_t i = 0; i < plan.schedules.size(); ++i) {
    const Schedule& schedule = plan.schedules[i];
    const int32_t slice = schedule_slice(i, plan.schedules.size(), part, slices);
    const std::string label = schedule_label(plan, i);
    // Every part skips the same schedules: the parts of the earlier one covered its steps.
    if (repeated[i] != kNoEarlier) {
      check_schedule_fields(schedule, plan.world_size, label);
      continue;
    }
    // A pipeline: the slices of all ranks tile its base, which is right exactly when the
    // pipeline is (pipeline_form.hpp); a fault is explained on the pipeline itself where its
    // slice shows it.
    // A compact one holds its base's steps already.
    if (schedule.slices != 1) {
      try {
        verify_slice(schedule, plan.world_size, label, slice, slices);
        continue;
      } catch (const VerifyError&) {
        if (expanded_op_count(schedule) <= kMaxExplainedExpansionOps)
          verify_slice(materialize(schedule), plan.world_size, label, slice, slices);
        throw;
      }
    }
    if (const auto pipeline = base_stands_for_pipeline(schedule) ? pipeline_base(schedule)
                                                                  : std::nullopt) {
      try {
        verify_slice(pipeline->base, plan.world_size, label, slice, slices);
        continue;
      } catch (const VerifyError&) {
        verify_slice(schedule, plan.world_size, label, slice, slices);
        throw;
      }
    }
    verify_slice(schedule, plan.world_size, label, slice, slices);
  }
}

void check_schedule_fields_only(const Schedule& schedule, int32_t world_size, const std::string& label) {
  check_schedule_fields(schedule, world_size, label);
}

void check_op_structure(const Op& op, uint64_t units, int32_t world_size, const std::string& label, size_t step,
                        size_t index) {
  RepeatFinder repeats(std::numeric_limits<int32_t>::max(), 0);  // no marks by rank: one op
  check_op(op, units, world_size, label, step, index, repeats);
}

}  // namespace flexplan::ir
