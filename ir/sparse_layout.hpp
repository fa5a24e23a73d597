// Who owns what in the sparse all-reduce (docs/sparse.md): learners grouped into machines (the
// parent of each learner in the plan's tree, read from its full name), each machine's learners
// splitting the vector into equal slices, uneven across machines as FlexReduce's ranges are at
// the machine level, and which slices of other machines each slice meets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/plan.hpp"

namespace flexplan::ir {

struct SparseLayout {
  // Machines in the order of their lowest rank; each lists its ranks ascending.
  std::vector<std::vector<int32_t>> machines;
  std::vector<int32_t> machine_of;   // by rank
  std::vector<int32_t> local_index;  // by rank: position within its machine
  // The tree path above each machine ("switch/rack0/m1"), for docs and error messages.
  std::vector<std::string> machine_names;

  // Rank's slice of a count-element vector: [begin, end) with begin = floor(j * count / n) for
  // local index j of n learners on its machine. Each machine's slices cover [0, count) once.
  struct Slice {
    uint64_t begin = 0, end = 0;
  };
  Slice slice(int32_t rank, uint64_t count) const;
  // The ranks of `machine` whose slices meet [begin, end) (ascending).
  std::vector<int32_t> overlapping(int32_t machine, Slice range, uint64_t count) const;
};

// From the plan's rank names: a learner's machine is its name without the last '/' component.
// Unnamed plans (no rank names) give one machine per rank. Throws std::invalid_argument if the
// names do not match the world size.
SparseLayout sparse_layout(const Plan& plan);
// The same from learner names by rank.
SparseLayout sparse_layout(const std::vector<std::string>& rank_names);

}  // namespace flexplan::ir
