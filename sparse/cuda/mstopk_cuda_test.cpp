// The CUDA MSTopK against the CPU one on the same data (sparse/cuda/mstopk_cuda.hpp), and its
// read bandwidth. Skipped, visibly, where no CUDA device is usable.
#include <gtest/gtest.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "sparse/cuda/mstopk_cuda.hpp"
#include "sparse/mstopk.hpp"

namespace flexplan::sparse {
namespace {

struct DeviceBuffers {
  float* x = nullptr;
  uint32_t* indices = nullptr;
  ~DeviceBuffers() {
    cudaFree(x);
    cudaFree(indices);
  }
};

std::vector<float> gaussian(size_t d) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> x(d);
  for (float& v : x) v = normal(rng);
  return x;
}

std::vector<uint32_t> run_on_device(const std::vector<float>& x, size_t k, const MsTopKOptions& options) {
  DeviceBuffers buffers;
  EXPECT_EQ(cudaMalloc(&buffers.x, x.size() * sizeof(float)), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&buffers.indices, std::max<size_t>(k, 1) * sizeof(uint32_t)), cudaSuccess);
  cudaMemcpy(buffers.x, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice);
  mstopk_cuda(buffers.x, x.size(), k, buffers.indices, options);
  std::vector<uint32_t> got(std::min(k, x.size()));
  cudaMemcpy(got.data(), buffers.indices, got.size() * sizeof(uint32_t), cudaMemcpyDeviceToHost);
  return got;
}

TEST(MsTopKCuda, SameSelectionAsTheCpu) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device here: the CUDA MSTopK is not tested";
  const auto x = gaussian(1 << 20);
  for (double density : {0.001, 0.01}) {
    const size_t k = static_cast<size_t>(density * x.size());
    std::vector<uint32_t> cpu;
    mstopk<float>(x, k, cpu);
    EXPECT_EQ(run_on_device(x, k, {}), cpu) << "density " << density;
  }
  const std::vector<float> tied(100, 2.0f);
  EXPECT_EQ(run_on_device(tied, 5, MsTopKOptions{30, 98}), (std::vector<uint32_t>{0, 1, 2, 98, 99}));
}

TEST(MsTopKCuda, ReadBandwidth) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device here: bandwidth not measured";
  const size_t d = size_t{16} << 20;
  const auto x = gaussian(d);
  DeviceBuffers buffers;
  ASSERT_EQ(cudaMalloc(&buffers.x, d * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&buffers.indices, d / 100 * sizeof(uint32_t)), cudaSuccess);
  cudaMemcpy(buffers.x, x.data(), d * sizeof(float), cudaMemcpyHostToDevice);
  mstopk_cuda(buffers.x, d, d / 100, buffers.indices);  // warm-up
  const auto start = std::chrono::steady_clock::now();
  const MsTopKStats stats = mstopk_cuda(buffers.x, d, d / 100, buffers.indices);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("mstopk_cuda: 16M float32, density 0.01: %.3f ms, %zu passes, %.1f GB/s read\n",
              seconds * 1e3, stats.full_passes, stats.full_passes * d * 4.0 / seconds / 1e9);
}

}  // namespace
}  // namespace flexplan::sparse
