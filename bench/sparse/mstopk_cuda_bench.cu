// The CUDA MSTopK against an exact top-k on the device (a full sort of |x| with Thrust) and
// against a device-to-device copy of x, side by side in one run: median times, MSTopK's recall
// and its bandwidth. Built where the CUDA MSTopK is; docs/sparse.md has the results.
//
//   flexplan_mstopk_cuda_bench [max_elements] [repetitions]
//
// Sizes go from 256K by powers of 4 (and 128M) up to max_elements (default 128M); densities
// 0.001 and 0.01, N(0, 1) data. Columns:
//   copy_us      cudaMemcpyAsync of x (4d bytes read, 4d written), median
//   mstopk_us    mstopk_cuda, median (it returns with the indices on the device, synchronized)
//   passes       its passes over x
//   of_copy      4d bytes / mstopk time, over the copy's 8d bytes / copy time: MSTopK's rate of
//                reading x against the device's copy bandwidth, as if x were read once
//   pass_of_copy the same with passes x 4d bytes: how fast each pass streams x
//   exact_us     sort |x| with its indices (descending), keep k: median
//   speedup      exact_us / mstopk_us
//   recall       |MSTopK ∩ exact| / k
#include <cuda_runtime.h>
#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/functional.h>
#include <thrust/sequence.h>
#include <thrust/sort.h>
#include <thrust/transform.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <random>
#include <vector>

#include "sparse/cuda/mstopk_cuda.hpp"

namespace {

using Clock = std::chrono::steady_clock;

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "flexplan_mstopk_cuda_bench: %s: %s\n", what, cudaGetErrorString(status));
    std::exit(1);
  }
}

// Median wall time of run(), which must return with its device work finished.
template <typename F>
double median_us(int repetitions, F&& run) {
  run();  // warm-up: module load, allocator pools
  std::vector<double> times;
  for (int r = 0; r < repetitions; ++r) {
    const auto start = Clock::now();
    run();
    times.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

struct NegAbs {
  __host__ __device__ float operator()(float v) const { return -fabsf(v); }
};

}  // namespace

int main(int argc, char** argv) {
  const size_t max_elements = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (size_t{128} << 20);
  const int repetitions = argc > 2 ? std::atoi(argv[2]) : 11;
  if (repetitions < 1 || max_elements < 1) {
    std::fprintf(stderr, "flexplan_mstopk_cuda_bench: max_elements and repetitions must be at least 1\n");
    return 2;
  }
  if (!flexplan::sparse::cuda_device_available()) {
    std::printf("SKIPPED: no CUDA device\n");
    return 77;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("# device: %s, %d SMs; N(0,1) float32; median of %d\n", prop.name, prop.multiProcessorCount,
              repetitions);
  std::printf("%10s %8s %10s %10s %6s %7s %12s %10s %8s %7s\n", "elements", "density", "copy_us", "mstopk_us",
              "passes", "of_copy", "pass_of_copy", "exact_us", "speedup", "recall");

  std::vector<size_t> sizes;
  for (size_t d = size_t{256} << 10; d <= max_elements; d *= 4) sizes.push_back(d);
  if (max_elements >= (size_t{128} << 20)) sizes.push_back(size_t{128} << 20);
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  for (const size_t d : sizes) {
    std::vector<float> host(d);
    for (float& v : host) v = normal(rng);
    thrust::device_vector<float> x(host.begin(), host.end()), copy(d), keys(d);
    thrust::device_vector<uint32_t> order(d);
    const float* x_raw = thrust::raw_pointer_cast(x.data());
    const double copy_us = median_us(repetitions, [&] {
      check(cudaMemcpyAsync(thrust::raw_pointer_cast(copy.data()), x_raw, d * 4, cudaMemcpyDeviceToDevice), "copy");
      check(cudaDeviceSynchronize(), "copy");
    });
    for (const double density : {0.001, 0.01}) {
      const size_t k = std::max<size_t>(1, static_cast<size_t>(density * d));
      thrust::device_vector<uint32_t> selected(k);
      flexplan::sparse::MsTopKStats stats;
      const double mstopk_us = median_us(repetitions, [&] {
        stats = flexplan::sparse::mstopk_cuda(x_raw, d, k, thrust::raw_pointer_cast(selected.data()));
      });
      const double exact_us = median_us(repetitions, [&] {
        thrust::transform(thrust::device, x.begin(), x.end(), keys.begin(), NegAbs());
        thrust::sequence(thrust::device, order.begin(), order.end());
        thrust::sort_by_key(thrust::device, keys.begin(), keys.end(), order.begin());
        check(cudaDeviceSynchronize(), "exact top-k");
      });
      std::vector<uint32_t> got(k), exact(k);
      thrust::copy(selected.begin(), selected.end(), got.begin());
      thrust::copy(order.begin(), order.begin() + k, exact.begin());
      std::sort(exact.begin(), exact.end());
      std::vector<uint32_t> common;
      std::set_intersection(got.begin(), got.end(), exact.begin(), exact.end(), std::back_inserter(common));
      const double copy_rate = 8.0 * d / copy_us;
      std::printf("%10zu %8.3f %10.1f %10.1f %6zu %6.0f%% %11.0f%% %10.1f %7.1fx %7.4f\n", d, density, copy_us,
                  mstopk_us, stats.full_passes, 100 * (4.0 * d / mstopk_us) / copy_rate,
                  100 * (4.0 * d * stats.full_passes / mstopk_us) / copy_rate, exact_us, exact_us / mstopk_us,
                  static_cast<double>(common.size()) / k);
    }
  }
  return 0;
}
