// The inputs flexbench reduces and the check of the results (nccl-tests' #wrong). Inputs are
// small integers, a function of (rank, index mod 14), so that every type holds them and every
// reduction of them exactly (avg up to one rounding), and the expected value of an element
// depends on its index mod 14 only: checking costs O(count), not O(count * ranks).
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/datatype.hpp"

namespace flexplan::bench {

void fill_pattern(void* buffer, size_t count, DataType type, ReduceOp op, int rank);
// Elements of `result` that differ from the all-reduce of every rank's pattern.
uint64_t count_wrong(const void* result, size_t count, DataType type, ReduceOp op, int world);

}  // namespace flexplan::bench
