// FlexReduce internals worth testing on their own: the choice of the schedule's units, and the
// per-learner reduce-call counts with the paper's bound (Eq. 12).
#pragma once

#include <cstdint>
#include <vector>

#include "ir/plan.hpp"
#include "topology/topology.hpp"

namespace flexplan {

// A learner's portion is the product of 1/degree over its branch ancestors. With units = the
// LCM over learners of those degree products every portion is a whole number of units. When
// that LCM does not fit in 64 bits, units = 2^60 and range boundaries are the cumulative
// portions rounded to the nearest unit: still monotone, still ending at exactly `units`, each
// portion off by less than one unit (a relative error below 2^-60 of the vector).
inline constexpr uint64_t kFallbackUnits = uint64_t{1} << 60;
struct FlexReduceUnits {
  uint64_t units = 1;
  bool exact = true;
};
FlexReduceUnits flexreduce_units(const Topology&);

// Reduce calls per learner in a FlexReduce schedule. "Rooted" counts the reduce ops a learner
// is the root of in the top (root-level) step: the subranges of its final range, which is what
// Eq. 12 bounds. "Taking part" counts every reduce op of the reduce-scatter whose group
// includes the learner or whose root it is, as the paper counts calls.
struct ReduceCallStats {
  double top_rooted_avg = 0;
  int top_rooted_max = 0;
  int eq12_bound = 0;  // the largest Eq. 12 bound over learners
  double taking_part_avg = 0;
  int taking_part_max = 0;
};
ReduceCallStats reduce_call_stats(const Topology&, const ir::Schedule& flexreduce);

// Eq. 12 generalised to any branch node y above the learner: at y's step the learner's new
// range (the product of 1/degree over its ancestors up to y) can meet at most
// ceil(new / smallest current range) boundaries of each child's partition, plus one.
// Eq. 12 itself is y = the root.
int eq12_bound(const Topology&, int rank, NodeId branch);

// Reduce ops rooted at each rank in the reduce-scatter step of `level` (zero where none).
std::vector<int> reduce_calls_rooted(const ir::Schedule&, int32_t world_size, int32_t level);

}  // namespace flexplan
