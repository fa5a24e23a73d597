// MSTopK on a CUDA device with Thrust: a transform-reduce for mean and max of |x|, one count
// per threshold search (every pass streams x: coalesced reads, no sort), then two stream
// compactions (at or above t1; the band [t2, t1)) and merges of sorted index lists.
#include "sparse/cuda/mstopk_cuda.hpp"

#include <cuda_runtime.h>
#include <thrust/copy.h>
#include <thrust/count.h>
#include <thrust/device_ptr.h>
#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/merge.h>
#include <thrust/transform_reduce.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace flexplan::sparse {
namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string("mstopk_cuda: ") + what + ": " + cudaGetErrorString(status));
}

struct AbsSum {
  __host__ __device__ double operator()(float v) const {
    const float a = fabsf(v);
    return a == a ? static_cast<double>(a) : 0.0;  // NaNs left out
  }
};
struct AbsMax {
  __host__ __device__ float operator()(float v) const {
    const float a = fabsf(v);
    return a == a ? a : 0.0f;
  }
};
struct IsNan {
  __host__ __device__ bool operator()(float v) const { return v != v; }
};
struct AtLeast {
  float threshold;
  __host__ __device__ bool operator()(float v) const { return fabsf(v) >= threshold; }
};
struct InBand {
  float low, high;
  __host__ __device__ bool operator()(float v) const {
    const float a = fabsf(v);
    return a >= low && a < high;
  }
};

}  // namespace

bool cuda_device_available() {
  int devices = 0;
  return cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
}

MsTopKStats mstopk_cuda(const float* x_raw, size_t d, size_t k, uint32_t* indices_raw,
                        const MsTopKOptions& options) {
  if (d > std::numeric_limits<uint32_t>::max())
    throw std::invalid_argument("mstopk_cuda: at most 2^32-1 elements (32-bit indices)");
  MsTopKStats stats;
  stats.threshold_high = std::numeric_limits<double>::infinity();
  k = k < d ? k : d;
  if (k == 0) return stats;
  const thrust::device_ptr<const float> x(x_raw);
  const thrust::device_ptr<uint32_t> out(indices_raw);
  const auto policy = thrust::device;

  const double sum = thrust::transform_reduce(policy, x, x + d, AbsSum(), 0.0, thrust::plus<double>());
  const float top = thrust::transform_reduce(policy, x, x + d, AbsMax(), 0.0f, thrust::maximum<float>());
  const size_t nans = thrust::count_if(policy, x, x + d, IsNan());
  stats.full_passes = 3;
  const double mean = d > nans ? sum / static_cast<double>(d - nans) : 0.0;

  double low = 0, high = 1;
  size_t k1 = 0, k2 = d - nans;
  float t1 = std::numeric_limits<float>::infinity(), t2 = 0;
  for (int it = 0; it < options.iterations; ++it) {
    const double ratio = low + (high - low) / 2;
    const float threshold = static_cast<float>(mean + ratio * (static_cast<double>(top) - mean));
    const size_t count = thrust::count_if(policy, x, x + d, AtLeast{threshold});
    ++stats.full_passes;
    if (count <= k) {
      high = ratio;
      if (count > k1) {
        k1 = count;
        t1 = threshold;
      }
    } else {
      low = ratio;
      if (count < k2) {
        k2 = count;
        t2 = threshold;
      }
    }
  }
  stats.threshold_high = t1;
  stats.threshold_low = t2;
  stats.above_high = k1;

  // Indices at or above t1, and the band's, both ascending.
  const thrust::counting_iterator<uint32_t> first(0);
  thrust::device_vector<uint32_t> above(k1);
  thrust::copy_if(policy, first, first + d, x, above.begin(), AtLeast{t1});
  const size_t band = k2 - k1, need = k - k1;
  thrust::device_vector<uint32_t> in_band(band);
  thrust::copy_if(policy, first, first + d, x, in_band.begin(), InBand{t2, t1});
  stats.full_passes += 2;
  // The window [start, start + need) of the band, wrapping: [start, end) and [0, wrapped).
  const size_t start = band == 0 ? 0 : options.band_start % band;
  const size_t end = start + need < band ? start + need : band;
  const size_t wrapped = need - (end - start);
  thrust::device_vector<uint32_t> partial(k1 + (end - start));
  thrust::merge(policy, above.begin(), above.end(), in_band.begin() + start, in_band.begin() + end,
                partial.begin());
  thrust::merge(policy, partial.begin(), partial.end(), in_band.begin(), in_band.begin() + wrapped, out);
  check(cudaDeviceSynchronize(), "selection");
  return stats;
}

}  // namespace flexplan::sparse
