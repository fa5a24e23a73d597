// Where a schedule's units fall in a call's buffer. Unit u of a U-unit schedule is element
// floor(u * count / U) of a count-element buffer (ir/plan.hpp); a reduce-scatter or all-gather
// instead maps each rank's shard of units onto that rank's block of the call's buffer, so that
// shard boundaries land exactly on the call's blocks whatever the per-rank counts (MPI's v forms)
// and whatever the plan's unit count.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ir/plan.hpp"

namespace flexplan {

class ElementMap {
 public:
  // The whole-buffer rule: unit u is element floor(u * count / units).
  void set_uniform(uint64_t units, uint64_t count);
  // Rank r's shard of `schedule` (explicit, or the equal shards of the contract) onto elements
  // [displacement(r), displacement(r) + counts[r]), blocks in rank order. Units no shard holds
  // map to no element. Returns an error in words, empty on success: the plan's shards out of
  // rank order, or a rank given elements where its shard holds no unit. Reuses its storage.
  std::string set_sharded(const ir::Schedule& schedule, int32_t world_size, std::span<const uint64_t> counts);

  uint64_t operator()(uint64_t unit) const;
  uint64_t total_elements() const { return total_; }
  bool sharded() const { return !segments_.empty(); }

 private:
  struct Segment {
    uint64_t unit_begin = 0, unit_end = 0;  // [unit_begin, unit_end), unit_begin < unit_end
    uint64_t element_begin = 0, elements = 0;
  };
  uint64_t units_ = 1, total_ = 0;
  std::vector<Segment> segments_;  // sorted by unit_begin, disjoint; empty for the uniform rule
};

}  // namespace flexplan
