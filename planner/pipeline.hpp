// Pipelining a schedule: the vector is cut into `slices` equal slices that go through the
// schedule's steps one step apart, so that step t runs step t - j of slice j for every j. The
// slices touch disjoint ranges, so a step's ops still read disjoint data; what changes is that
// the levels of a tree (and a reduce-scatter and the all-gather after it) work at once, each on
// its own slice. A schedule of m steps becomes m + slices - 1 steps, each moving 1/slices of the
// data, so the bandwidth term approaches the busiest link's total load instead of the sum of
// every step's busiest link, at the price of more steps' latency.
#pragma once

#include <cstdint>

#include "ir/plan.hpp"

namespace flexplan {

// Throws std::invalid_argument when units * slices does not fit in 64 bits.
ir::Schedule pipeline_slices(const ir::Schedule&, uint32_t slices);

}  // namespace flexplan
