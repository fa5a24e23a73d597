// Units to elements, uniform or shard by shard (element_map.hpp).
#include "runtime/element_map.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "ir/collective_contract.hpp"

namespace flexplan {

void ElementMap::set_uniform(uint64_t units, uint64_t count) {
  units_ = std::max<uint64_t>(units, 1);
  total_ = count;
  segments_.clear();
}

std::string ElementMap::set_sharded(const ir::Schedule& schedule, int32_t world_size,
                                    std::span<const uint64_t> counts) {
  segments_.clear();
  units_ = std::max<uint64_t>(schedule.units, 1);
  total_ = 0;
  if (counts.size() != static_cast<size_t>(world_size)) {
    return fmt::format("{} per-rank counts for {} ranks", counts.size(), world_size);
  }
  if (schedule.slices != 1) return "a sharded schedule held as a pipeline";
  uint64_t previous_end = 0;
  for (int32_t r = 0; r < world_size; ++r) {
    const ir::UnitRange shard = ir::shard_of(schedule, world_size, r);
    const uint64_t count = counts[static_cast<size_t>(r)];
    if (shard.begin == shard.end) {
      if (count > 0) {
        return fmt::format("rank {} has {} elements but the plan's schedule ({}) gives its shard no unit",
                           r, count, schedule.algorithm);
      }
      total_ += count;
      continue;
    }
    // Blocks lie in rank order in the call's buffer; a task's unit range then stays one
    // element range only if the shards do too.
    if (shard.begin < previous_end) {
      return fmt::format("the plan's schedule ({}) has shards out of rank order (rank {}'s starts at unit {})",
                         schedule.algorithm, r, shard.begin);
    }
    previous_end = shard.end;
    segments_.push_back({shard.begin, shard.end, total_, count});
    total_ += count;
  }
  if (segments_.empty()) segments_.push_back({0, units_, 0, 0});  // (no unit in any shard)
  return {};
}

uint64_t ElementMap::operator()(uint64_t unit) const {
  if (segments_.empty()) return ir::unit_to_element(unit, units_, total_);
  // The segment holding `unit`, or the gap after the last segment starting at or before it.
  auto it = std::upper_bound(segments_.begin(), segments_.end(), unit,
                             [](uint64_t u, const Segment& s) { return u < s.unit_begin; });
  if (it == segments_.begin()) return 0;  // a gap before the first shard
  const Segment& s = *std::prev(it);
  if (unit >= s.unit_end) return s.element_begin + s.elements;  // a gap: no element
  return s.element_begin + ir::unit_to_element(unit - s.unit_begin, s.unit_end - s.unit_begin, s.elements);
}

}  // namespace flexplan
