// The arithmetic of a reduce hop and of avg's final division.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/datatype.hpp"

namespace flexplan::kernels {

// dst[i] = a[i] (op) b[i] for n elements; dst may be a or b. Avg combines as Sum. Integer sum
// and prod wrap modulo 2^bits (two's complement), never undefined behaviour.
void combine(void* dst, const void* a, const void* b, size_t n, DataType type, ReduceOp op);

// buf[i] /= divisor; integers truncate toward zero (C++ division), 16-bit floats round once.
void divide(void* buf, size_t n, DataType type, uint64_t divisor);

}  // namespace flexplan::kernels
