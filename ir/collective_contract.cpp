// Each collective's before and after, in units (collective_contract.hpp).
#include "ir/collective_contract.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace flexplan::ir {

namespace {

uint64_t equal_cut(uint64_t units, int32_t world_size, int64_t rank) {
  return static_cast<uint64_t>(static_cast<unsigned __int128>(units) * static_cast<uint64_t>(rank) /
                               static_cast<uint64_t>(world_size));
}

// The first unit at or after `unit` where rank `rank`'s shard starts or ends (or `units`).
uint64_t next_shard_edge(const UnitRange& shard, uint64_t unit, uint64_t units) {
  if (unit < shard.begin) return shard.begin;
  if (unit < shard.end) return shard.end;
  return units;
}

}  // namespace

UnitRange shard_of(const Schedule& schedule, int32_t world_size, int32_t rank) {
  if (!schedule.shards.empty()) return schedule.shards.at(static_cast<size_t>(rank));
  return {equal_cut(schedule.units, world_size, rank),
          equal_cut(schedule.units, world_size, int64_t{rank} + 1)};
}

namespace {

// The owner under equal shards: the largest r with floor(r*U/P) <= unit (shards of equal cuts
// may be empty when U < P).
int32_t equal_owner(const Schedule& schedule, int32_t world_size, uint64_t unit) {
  int32_t low = 0, high = world_size - 1;
  while (low < high) {
    const int32_t mid = low + (high - low + 1) / 2;
    if (equal_cut(schedule.units, world_size, mid) <= unit)
      low = mid;
    else
      high = mid - 1;
  }
  return low;
}

}  // namespace

int32_t shard_owner(const Schedule& schedule, int32_t world_size, uint64_t unit) {
  return ContractView(schedule, world_size).owner(unit);
}

bool combines(Collective collective) {
  return collective != Collective::AllGather && collective != Collective::Broadcast;
}

HoldingRun holding_before(const Schedule& schedule, int32_t world_size, int32_t rank,
                          uint64_t unit) {
  const uint64_t units = schedule.units;
  switch (schedule.collective) {
    case Collective::AllGather: {
      const UnitRange shard = shard_of(schedule, world_size, rank);
      const bool inside = shard.begin <= unit && unit < shard.end;
      return {inside ? Holding::Own : Holding::Nothing, -1, next_shard_edge(shard, unit, units)};
    }
    case Collective::Broadcast:
      return {rank == schedule.root ? Holding::Own : Holding::Nothing, -1, units};
    default:
      return {Holding::Own, -1, units};
  }
}

HoldingRun holding_after(const Schedule& schedule, int32_t world_size, int32_t rank,
                         uint64_t unit) {
  const uint64_t units = schedule.units;
  switch (schedule.collective) {
    case Collective::AllReduce:
      return {Holding::Sum, -1, units};
    case Collective::ReduceScatter: {
      const UnitRange shard = shard_of(schedule, world_size, rank);
      const bool inside = shard.begin <= unit && unit < shard.end;
      return {inside ? Holding::Sum : Holding::Nothing, -1, next_shard_edge(shard, unit, units)};
    }
    case Collective::AllGather:
      return ContractView(schedule, world_size).after(rank, unit);
    case Collective::Broadcast:
      return {Holding::CopyOf, schedule.root, units};
    case Collective::Reduce:
      return {rank == schedule.root ? Holding::Sum : Holding::Nothing, -1, units};
  }
  return {Holding::Nothing, -1, units};
}

ContractView::ContractView(const Schedule& schedule, int32_t world_size)
    : schedule_(schedule), world_size_(world_size) {
  for (size_t r = 0; r < schedule.shards.size(); ++r)
    if (schedule.shards[r].begin < schedule.shards[r].end)
      owned_.push_back({schedule.shards[r].begin, schedule.shards[r].end, static_cast<int32_t>(r)});
  std::sort(owned_.begin(), owned_.end(),
            [](const Owned& a, const Owned& b) { return a.begin < b.begin; });
  for (const Owned& shard : owned_) {
    if (!owned_runs_.empty() && owned_runs_.back().end >= shard.begin)
      owned_runs_.back().end = std::max(owned_runs_.back().end, shard.end);
    else
      owned_runs_.push_back({shard.begin, shard.end});
  }
}

int32_t ContractView::owner(uint64_t unit) const {
  if (unit >= schedule_.units) return -1;
  if (schedule_.shards.empty()) return equal_owner(schedule_, world_size_, unit);
  auto at = std::upper_bound(owned_.begin(), owned_.end(), unit,
                             [](uint64_t u, const Owned& shard) { return u < shard.begin; });
  if (at == owned_.begin()) return -1;
  --at;
  return unit < at->end ? at->rank : -1;
}

HoldingRun ContractView::before(int32_t rank, uint64_t unit) const {
  return holding_before(schedule_, world_size_, rank, unit);  // O(1): its own shard only
}

HoldingRun ContractView::after(int32_t rank, uint64_t unit) const {
  if (schedule_.collective != Collective::AllGather)
    return holding_after(schedule_, world_size_, rank, unit);  // O(1) for the others
  // Explicit shards may leave units to no rank: anything goes there, up to the next shard.
  const int32_t source = owner(unit);
  if (schedule_.shards.empty()) return {Holding::CopyOf, source, schedule_.units};
  auto run = std::upper_bound(owned_runs_.begin(), owned_runs_.end(), unit,
                              [](uint64_t u, const UnitRange& r) { return u < r.begin; });
  if (run != owned_runs_.begin() && unit < std::prev(run)->end)
    return {Holding::CopyOf, source, std::prev(run)->end};
  return {Holding::Nothing, -1, run == owned_runs_.end() ? schedule_.units : run->begin};
}

std::string contract_fault(const Schedule& schedule, int32_t world_size) {
  const Collective collective = schedule.collective;
  if (static_cast<size_t>(collective) >= kCollectiveCount) return "invalid collective";
  if (has_root(collective)) {
    if (schedule.root < 0 || schedule.root >= world_size)
      return fmt::format("root {} is not among the {} ranks", schedule.root, world_size);
  } else if (schedule.root != 0) {
    return fmt::format("{} has no root, but root {} is given", to_string(collective), schedule.root);
  }
  if (!schedule.shards.empty()) {
    if (!has_shards(collective))
      return fmt::format("{} has no shards, but {} are given", to_string(collective),
                         schedule.shards.size());
    if (schedule.shards.size() != static_cast<size_t>(world_size))
      return fmt::format("{} shards for {} ranks (give one per rank, or none for equal shards)",
                         schedule.shards.size(), world_size);
    std::vector<std::pair<UnitRange, size_t>> sorted;
    for (size_t r = 0; r < schedule.shards.size(); ++r) {
      const UnitRange& shard = schedule.shards[r];
      if (shard.begin > shard.end || shard.end > schedule.units)
        return fmt::format("shard of rank {} [{},{}) is not a range within the {} units", r,
                           shard.begin, shard.end, schedule.units);
      if (shard.begin < shard.end) sorted.emplace_back(shard, r);
    }
    std::sort(sorted.begin(), sorted.end(),
              [](const auto& a, const auto& b) { return a.first.begin < b.first.begin; });
    for (size_t i = 1; i < sorted.size(); ++i)
      if (sorted[i].first.begin < sorted[i - 1].first.end)
        return fmt::format("the shards of ranks {} [{},{}) and {} [{},{}) overlap",
                           sorted[i - 1].second, sorted[i - 1].first.begin, sorted[i - 1].first.end,
                           sorted[i].second, sorted[i].first.begin, sorted[i].first.end);
  }
  if (!combines(collective)) {
    for (size_t s = 0; s < schedule.steps.size(); ++s)
      for (size_t o = 0; o < schedule.steps[s].ops.size(); ++o)
        if (schedule.steps[s].ops[o].kind == OpKind::Reduce)
          return fmt::format("step {} op {}: a reduce op, but {} copies data and never combines it",
                             s, o, to_string(collective));
  }
  if (schedule.slices != 1 && has_shards(collective))
    return fmt::format("a {} schedule cannot be held as a compact pipeline of {} slices (its "
                       "slices would cut across the shards)",
                       to_string(collective), schedule.slices);
  return {};
}

std::string describe_contract(const Schedule& schedule) {
  if (has_root(schedule.collective))
    return fmt::format("{} (root {})", to_string(schedule.collective), schedule.root);
  if (has_shards(schedule.collective))
    return fmt::format("{} ({} shards)", to_string(schedule.collective),
                       schedule.shards.empty() ? "equal" : "explicit");
  return std::string(to_string(schedule.collective));
}

}  // namespace flexplan::ir
