// Ring reduce-scatter and all-gather as IR steps, shared by the ring, BlueConnect and
// hierarchical schedules. A ring step is a set of two-member ops: member i passes one chunk
// to member i+1 (a reduce whose root is the receiver, or a broadcast whose root is the sender).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ir/plan.hpp"

namespace flexplan {

// A ring of ranks working on [begin, end), which splits into members.size() equal chunks;
// after the reduce-scatter member i owns the sum of chunk i.
struct RingSpec {
  std::vector<int32_t> members;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// Append members-1 steps that run every ring in parallel (all rings must have the same size
// and a range divisible by it). The all-gather expects the state the reduce-scatter leaves.
void append_ring_reduce_scatter(std::vector<ir::Step>& steps, std::span<const RingSpec> rings,
                                int32_t level);
void append_ring_all_gather(std::vector<ir::Step>& steps, std::span<const RingSpec> rings,
                            int32_t level);

}  // namespace flexplan
