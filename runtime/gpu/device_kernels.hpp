// The device-local work of the GPU backend, enqueued on a stream: filling a range with a
// reduction's identity, avg's final division, and element-wise combining (the UCX path's local
// reductions). device_kernels.cu implements them as CUDA kernels; device_kernels_host.cpp as host
// functions run by the stream (cudaLaunchHostFunc), which is what the emulation links.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "runtime/datatype.hpp"

namespace flexplan::gpu {

// dst[0, n) = the identity of `op` for `type` (0 for sum and avg, 1 for prod, the largest value
// or +inf for min, the smallest or -inf for max).
void fill_identity(void* dst, size_t n, DataType type, ReduceOp op, cudaStream_t stream);
// buf[i] /= divisor (integers truncate toward zero, 16-bit floats round once).
void divide(void* buf, size_t n, DataType type, uint64_t divisor, cudaStream_t stream);
// dst[i] = a[i] op b[i] (avg combines as sum); dst may be a or b.
void combine(void* dst, const void* a, const void* b, size_t n, DataType type, ReduceOp op,
             cudaStream_t stream);
// True when these run as CUDA kernels (device_kernels.cu), false for the host stand-in.
bool kernels_on_device();

}  // namespace flexplan::gpu
