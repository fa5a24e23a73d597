// MSTopK against the exact top-k (nth_element on |x|) on float32 vectors: median time of each
// over a few repetitions, side by side in one run, and MSTopK's recall.
//
//   flexplan_mstopk_bench [max_elements] [repetitions] [gaussian|laplace|layers] [seed]
//
// gaussian (the default): N(0, 1). laplace: heavier tails. layers: gradient-like, runs of 4096
// to 1M elements (a "layer" each), each N(0, s^2) with s log-uniform in [1e-4, 1]: the top k
// sit in a few layers, and an evenly spread sample sees them unevenly.
//
// Sizes go from 256K by powers of 4 (and 16M) up to max_elements (default 16M); densities
// 0.001, 0.005, 0.01. Prints one table row per (size, density).
#include <algorithm>
#include <chrono>
#include <string>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "sparse/mstopk.hpp"

namespace {

using Clock = std::chrono::steady_clock;

template <typename F>
double median_seconds(int repetitions, F&& run) {
  std::vector<double> times;
  for (int r = 0; r < repetitions; ++r) {
    const auto start = Clock::now();
    run();
    times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const size_t max_elements = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (size_t{16} << 20);
  const int repetitions = argc > 2 ? std::atoi(argv[2]) : 5;
  const std::string distribution = argc > 3 ? argv[3] : "gaussian";
  const unsigned seed = argc > 4 ? static_cast<unsigned>(std::strtoul(argv[4], nullptr, 10)) : 1;
  if (distribution != "gaussian" && distribution != "laplace" && distribution != "layers") {
    std::fprintf(stderr, "flexplan_mstopk_bench: distribution '%s': gaussian, laplace or layers\n",
                 distribution.c_str());
    return 2;
  }
  std::vector<size_t> sizes;
  for (size_t d = size_t{256} << 10; d <= max_elements; d *= 4) sizes.push_back(d);
  if (max_elements >= (size_t{16} << 20) &&
      std::find(sizes.begin(), sizes.end(), size_t{16} << 20) == sizes.end())
    sizes.push_back(size_t{16} << 20);
  if (max_elements >= (size_t{128} << 20)) sizes.push_back(size_t{128} << 20);
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());

  std::printf("%12s %8s %10s %12s %12s %9s %8s %7s\n", "elements", "density", "k",
              "mstopk_ms", "exact_ms", "speedup", "recall", "passes");
  std::printf("# %s, seed %u\n", distribution.c_str(), seed);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::exponential_distribution<float> exponential(1.0f);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  for (size_t d : sizes) {
    std::vector<float> x(d);
    if (distribution == "gaussian") {
      for (float& v : x) v = normal(rng);
    } else if (distribution == "laplace") {
      for (float& v : x) v = exponential(rng) * (rng() & 1 ? 1.0f : -1.0f);
    } else {
      for (size_t i = 0; i < d;) {
        const size_t layer = size_t{4096} << (rng() % 9);  // 4K .. 1M
        const float scale = std::pow(10.0f, -4.0f * uniform(rng));
        for (size_t end = std::min(d, i + layer); i < end; ++i) x[i] = scale * normal(rng);
      }
    }
    for (double density : {0.001, 0.005, 0.01}) {
      const size_t k = static_cast<size_t>(density * static_cast<double>(d));
      std::vector<uint32_t> approx, exact;
      flexplan::sparse::MsTopKStats stats;
      // Interleaved so that both see the same machine load.
      double t_approx = 0, t_exact = 0;
      std::vector<double> approx_times, exact_times;
      for (int r = 0; r < repetitions; ++r) {
        approx_times.push_back(median_seconds(1, [&] { stats = flexplan::sparse::mstopk<float>(x, k, approx); }));
        exact_times.push_back(median_seconds(1, [&] { flexplan::sparse::exact_topk<float>(x, k, exact); }));
      }
      std::sort(approx_times.begin(), approx_times.end());
      std::sort(exact_times.begin(), exact_times.end());
      t_approx = approx_times[approx_times.size() / 2];
      t_exact = exact_times[exact_times.size() / 2];
      std::vector<uint32_t> both;
      std::set_intersection(approx.begin(), approx.end(), exact.begin(), exact.end(),
                            std::back_inserter(both));
      const double recall = static_cast<double>(both.size()) / static_cast<double>(exact.size());
      std::printf("%12zu %8.3f %10zu %12.2f %12.2f %8.1fx %8.4f %7zu\n", d, density, k,
                  t_approx * 1e3, t_exact * 1e3, t_exact / t_approx, recall, stats.full_passes);
      std::fflush(stdout);
    }
  }
  return 0;
}
