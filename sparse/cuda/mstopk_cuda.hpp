// MSTopK on a CUDA device: the selection of sparse/mstopk.hpp (same thresholds, same band
// rule, indices ascending) on float32 data in device memory. Built with the GPU backend's
// kernels where nvcc is usable (docs/sparse.md, CUDA).
#pragma once

#include <cstddef>
#include <cstdint>

#include "sparse/mstopk_types.hpp"

namespace flexplan::sparse {

// x and indices are device pointers; indices must hold min(k, d) entries. Runs on the legacy
// default stream and returns when the indices are written: fill x on that stream, or
// synchronize the stream that filled it first. Returns the same statistics as the CPU version
// (full_passes counts the passes over x). The mean of |x| is summed in a different order than
// on the CPU, so a threshold can differ in its last bit, and with it the selection of an
// element lying exactly on it; search lengths (options.iterations) up to 40 follow the CPU's
// steps. Fewer than min(k, d) indices are written only where fewer elements qualify (NaNs, or
// infinities, which make every threshold NaN). Throws std::runtime_error on a CUDA error.
MsTopKStats mstopk_cuda(const float* x, size_t d, size_t k, uint32_t* indices,
                        const MsTopKOptions& options = {});

// Whether a CUDA device is usable here (false, not an error, where none is).
bool cuda_device_available();

}  // namespace flexplan::sparse
