// The inputs flexbench reduces and the check of the results (nccl-tests' #wrong). Inputs are
// small integers, a function of (rank, index mod 14), so that every type holds them and every
// reduction of them exactly (avg up to one rounding), and the expected value of an element
// depends on its index mod 14 only: checking costs O(count), not O(count * ranks).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ir/plan.hpp"
#include "runtime/datatype.hpp"

namespace flexplan::bench {

void fill_pattern(void* buffer, size_t count, DataType type, ReduceOp op, int rank);
// Elements of `result` that differ from the all-reduce of every rank's pattern; `result` holds
// the elements from index `first` on (a reduce-scatter's block).
uint64_t count_wrong(const void* result, size_t count, DataType type, ReduceOp op, int world, size_t first = 0);
// Elements of `result` that differ from rank `rank`'s pattern (an all-gather's block r, a
// broadcast from root r).
uint64_t count_wrong_copy(const void* result, size_t count, DataType type, ReduceOp op, int rank);

// One call of a collective at nccl-tests' `size` (the whole buffer's bytes): each rank's block
// (reduce-scatter, all-gather; 0 for the others) and the whole buffer's elements.
struct CallShape {
  uint64_t per_rank = 0;
  uint64_t count = 0;
};
CallShape call_shape(ir::Collective collective, uint64_t size, size_t element, int world);
// Elements of rank `rank`'s result of the collective over every rank's pattern that differ
// from what it should hold (0 off a reduce's root, whose result is unspecified).
uint64_t count_wrong_result(ir::Collective collective, int root, const void* result, CallShape shape, DataType type,
                            ReduceOp op, int rank, int world);

}  // namespace flexplan::bench
