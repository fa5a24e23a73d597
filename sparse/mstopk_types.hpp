// MSTopK's options and statistics, shared by the CPU (sparse/mstopk.hpp) and CUDA
// (sparse/cuda/mstopk_cuda.hpp) versions; C++17 so that nvcc's dialect can read it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace flexplan::sparse {

struct MsTopKOptions {
  int iterations = 30;      // N of the threshold search
  uint64_t band_start = 0;  // which band elements fill up to k (rotate it to avoid index bias)
};

// What a selection found besides the indices, for tests and the benchmark.
struct MsTopKStats {
  double threshold_high = 0;  // t1 (+inf if none)
  double threshold_low = 0;   // t2
  size_t above_high = 0;      // k1
  size_t full_passes = 0;     // passes over all d elements
};

}  // namespace flexplan::sparse
