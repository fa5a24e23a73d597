// The CUDA MSTopK against the CPU one on the same data (sparse/cuda/mstopk_cuda.hpp). Skipped,
// visibly, where no CUDA device is usable; its speed is measured by flexplan_mstopk_cuda_bench.
#include <gtest/gtest.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
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

std::vector<float> gaussian(size_t d, unsigned seed = 7) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> x(d);
  for (float& v : x) v = normal(rng);
  return x;
}

// offset > 0 places x that many elements past an allocation's start (not 16-byte aligned).
std::vector<uint32_t> run_on_device(const std::vector<float>& x, size_t k, const MsTopKOptions& options,
                                    MsTopKStats* stats = nullptr, size_t offset = 0) {
  DeviceBuffers buffers;
  EXPECT_EQ(cudaMalloc(&buffers.x, std::max<size_t>(x.size() + offset, 1) * sizeof(float)), cudaSuccess);
  // Poisoned, and 16 entries longer than min(k, d): an index never written shows as
  // 0xffffffff, and a write past the end as a changed guard entry.
  const size_t room = std::min(k, x.size()), guard = 16;
  EXPECT_EQ(cudaMalloc(&buffers.indices, (room + guard) * sizeof(uint32_t)), cudaSuccess);
  const float* input = buffers.x + offset;
  cudaMemcpy(buffers.x + offset, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemset(buffers.indices, 0xff, (room + guard) * sizeof(uint32_t));
  const MsTopKStats got_stats = mstopk_cuda(input, x.size(), k, buffers.indices, options);
  if (stats != nullptr) *stats = got_stats;
  std::vector<uint32_t> got(room + guard);
  cudaMemcpy(got.data(), buffers.indices, got.size() * sizeof(uint32_t), cudaMemcpyDeviceToHost);
  for (size_t i = room; i < room + guard; ++i) EXPECT_EQ(got[i], 0xffffffffu) << "written past min(k, d) at " << i;
  got.resize(room);
  return got;
}

// What MSTopK selects once its thresholds are known (docs/sparse.md): every index with
// |x| >= t1, and need = k - k1 indices of the band t2 <= |x| < t1, taken from the band's
// position band_start % band on, wrapping; ascending.
std::vector<uint32_t> select_given_thresholds(const std::vector<float>& x, size_t k, float t1, float t2,
                                              uint64_t band_start) {
  std::vector<uint32_t> above, band;
  for (size_t i = 0; i < x.size(); ++i) {
    const float a = std::fabs(x[i]);
    if (a >= t1) above.push_back(static_cast<uint32_t>(i));
    else if (a >= t2) band.push_back(static_cast<uint32_t>(i));
  }
  std::vector<uint32_t> chosen = above;
  const size_t need = std::min(k - std::min(k, above.size()), band.size());
  for (size_t j = 0; j < need; ++j) chosen.push_back(band[(band_start + j) % band.size()]);
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

// Against the CPU version on the same data: sizes that are not powers of two, densities up to
// 0.1, search lengths that are not multiples of the 10 steps one histogram pass answers,
// rotated bands, NaNs in the data. The mean of |x| is summed in another order on each side, so
// a threshold may differ in its last bits: the thresholds must agree to 1e-5, and the indices
// must be exactly those the thresholds the device found select (and the CPU's where the
// thresholds are equal, which is the usual case).
TEST(MsTopKCuda, SameSelectionAsTheCpu) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device here: the CUDA MSTopK is not tested";
  int identical = 0, runs = 0;
  for (const size_t d : {size_t{1} << 20, size_t{1000003}}) {
    auto x = gaussian(d, static_cast<unsigned>(d));
    for (size_t i = 17; i < d; i += 100000) x[i] = std::numeric_limits<float>::quiet_NaN();
    for (const double density : {0.001, 0.01, 0.1})
      for (const int iterations : {30, 25, 7, 0})
        for (const uint64_t band_start : {uint64_t{0}, uint64_t{12345}}) {
          const size_t k = static_cast<size_t>(density * d);
          const MsTopKOptions options{iterations, band_start};
          std::vector<uint32_t> cpu;
          const MsTopKStats cpu_stats = mstopk<float>(x, k, cpu, options);
          MsTopKStats stats;
          const auto got = run_on_device(x, k, options, &stats);
          const std::string where = "d " + std::to_string(d) + " density " + std::to_string(density) +
                                    " iterations " + std::to_string(iterations) + " band " +
                                    std::to_string(band_start);
          EXPECT_EQ(got, select_given_thresholds(x, k, static_cast<float>(stats.threshold_high),
                                                 static_cast<float>(stats.threshold_low), band_start))
              << where;
          if (std::isinf(cpu_stats.threshold_high)) EXPECT_TRUE(std::isinf(stats.threshold_high)) << where;
          else EXPECT_NEAR(stats.threshold_high, cpu_stats.threshold_high, 1e-5 * cpu_stats.threshold_high) << where;
          EXPECT_NEAR(stats.threshold_low, cpu_stats.threshold_low, 1e-5 * cpu_stats.threshold_low) << where;
          ++runs;
          identical += got == cpu;
        }
  }
  std::printf("the CPU's indices exactly in %d of %d runs\n", identical, runs);
  EXPECT_GE(identical, runs * 9 / 10);
  const std::vector<float> tied(100, 2.0f);
  EXPECT_EQ(run_on_device(tied, 5, MsTopKOptions{30, 98}), (std::vector<uint32_t>{0, 1, 2, 98, 99}));
  std::vector<uint32_t> every(100);
  for (uint32_t i = 0; i < 100; ++i) every[i] = i;
  EXPECT_EQ(run_on_device(tied, 100, MsTopKOptions{}), every);
  EXPECT_TRUE(run_on_device(tied, 0, MsTopKOptions{}).empty());
}

// Small and odd inputs against the CPU: k = d with NaNs (everything, NaNs too), fewer elements
// than one 16-byte load, a length that is no multiple of 4.
TEST(MsTopKCuda, SmallAndOddInputs) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device here: the CUDA MSTopK is not tested";
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<std::pair<std::vector<float>, size_t>> cases = {
      {{nan, 1.0f, nan, -2.0f}, 4}, {{nan, nan, nan}, 3}, {{3.0f, -1.0f, 2.0f}, 2}, {{0.5f}, 1},
      {gaussian(4099, 3), 41}, {gaussian(4099, 4), 4099}};
  for (const auto& [x, k] : cases) {
    std::vector<uint32_t> cpu;
    mstopk<float>(x, k, cpu);
    EXPECT_EQ(run_on_device(x, k, MsTopKOptions{}), cpu) << "d " << x.size() << " k " << k;
  }
}

// Infinities make every threshold NaN: the selection is then not the CPU's, but at most k
// indices are written, each once, ascending, and nothing past k.
TEST(MsTopKCuda, InfinitiesNeverWritePastK) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device here: the CUDA MSTopK is not tested";
  const float inf = std::numeric_limits<float>::infinity();
  auto x = gaussian(10000, 9);
  x[17] = inf;
  x[5000] = -inf;
  const auto got = run_on_device(x, 100, MsTopKOptions{});  // checks the guard entries
  std::vector<uint32_t> written;
  for (uint32_t i : got)
    if (i != 0xffffffffu) written.push_back(i);
  EXPECT_TRUE(std::is_sorted(written.begin(), written.end()));
  EXPECT_EQ(std::adjacent_find(written.begin(), written.end()), written.end());
  for (uint32_t i : written) EXPECT_LT(i, x.size());
}

// Input that is not 16-byte aligned takes the single-load path: the same indices.
TEST(MsTopKCuda, UnalignedInputSelectsTheSame) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device here: the CUDA MSTopK is not tested";
  const auto x = gaussian(1000003, 5);
  for (size_t offset : {1, 2, 3}) {
    std::vector<uint32_t> cpu;
    mstopk<float>(x, 10000, cpu);
    EXPECT_EQ(run_on_device(x, 10000, MsTopKOptions{}, nullptr, offset), cpu) << "offset " << offset;
  }
}

// 30 search steps take 3 histogram passes; with the statistics pass and two compactions, 6.
TEST(MsTopKCuda, SixPassesForThirtySteps) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device here: the CUDA MSTopK is not tested";
  MsTopKStats stats;
  run_on_device(gaussian(1 << 16), 100, MsTopKOptions{}, &stats);
  EXPECT_EQ(stats.full_passes, 6u);
  run_on_device(gaussian(1 << 16), 100, MsTopKOptions{31, 0}, &stats);
  EXPECT_EQ(stats.full_passes, 7u);
}

}  // namespace
}  // namespace flexplan::sparse
