// MSTopK's selection semantics (sparse/mstopk.hpp) and the exact top-k it is measured against.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "sparse/mstopk.hpp"

namespace flexplan::sparse {
namespace {

std::vector<float> gaussian(size_t d, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(d);
  for (float& v : x) v = normal(rng);
  return x;
}

// The k largest magnitudes by a full sort, ties to the lower index.
std::vector<uint32_t> reference_topk(const std::vector<float>& x, size_t k) {
  std::vector<uint32_t> order(x.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return std::fabs(x[a]) > std::fabs(x[b]); });
  order.resize(std::min(k, x.size()));
  std::sort(order.begin(), order.end());
  return order;
}

// Algorithm 1 as docs/sparse.md states it, with none of mstopk's shortcuts: every threshold
// counted over the whole vector, the selection made over the whole vector.
template <typename T>
std::vector<uint32_t> reference_mstopk(const std::vector<T>& x, size_t k, const MsTopKOptions& o,
                                       MsTopKStats* stats = nullptr) {
  const size_t d = x.size();
  k = std::min(k, d);
  std::vector<uint32_t> out;
  if (k == 0) return out;
  if (k == d) {
    out.resize(d);
    std::iota(out.begin(), out.end(), 0u);
    return out;
  }
  double sum = 0, top = 0;
  size_t nans = 0;
  for (T v : x) {
    const double a = std::fabs(static_cast<double>(v));
    if (std::isnan(a)) {
      ++nans;
      continue;
    }
    sum += a;
    top = std::max(top, a);
  }
  const double mean = d > nans ? sum / static_cast<double>(d - nans) : 0.0;
  double low = 0, high = 1;
  size_t k1 = 0, k2 = d - nans;
  T t1 = std::numeric_limits<T>::infinity(), t2 = 0;
  for (int it = 0; it < o.iterations; ++it) {
    const double ratio = low + (high - low) / 2;
    const T threshold = static_cast<T>(mean + ratio * (top - mean));
    size_t count = 0;
    for (T v : x) count += std::fabs(v) >= threshold;
    if (count <= k) {
      high = ratio;
      if (count > k1) k1 = count, t1 = threshold;
    } else {
      low = ratio;
      if (count < k2) k2 = count, t2 = threshold;
    }
  }
  if (stats) stats->threshold_high = t1, stats->threshold_low = t2, stats->above_high = k1;
  const size_t band = k2 - k1, need = k - k1;
  const size_t start = band == 0 ? 0 : o.band_start % band;
  size_t rank = 0;
  for (size_t i = 0; i < d; ++i) {
    const T a = std::fabs(x[i]);
    if (a >= t1) {
      out.push_back(static_cast<uint32_t>(i));
    } else if (a >= t2) {
      if ((rank + band - start) % band < need) out.push_back(static_cast<uint32_t>(i));
      ++rank;
    }
  }
  return out;
}

double recall(const std::vector<uint32_t>& got, const std::vector<uint32_t>& exact) {
  std::vector<uint32_t> both;
  std::set_intersection(got.begin(), got.end(), exact.begin(), exact.end(), std::back_inserter(both));
  return exact.empty() ? 1.0 : static_cast<double>(both.size()) / static_cast<double>(exact.size());
}

TEST(MsTopK, ReturnsExactlyKAscendingAndRespectsThresholds) {
  for (size_t d : {1u, 7u, 1000u, 65536u}) {
    const auto x = gaussian(d, 11 + static_cast<unsigned>(d));
    for (double density : {0.001, 0.01, 0.1, 0.5}) {
      const size_t k = std::max<size_t>(1, static_cast<size_t>(density * static_cast<double>(d)));
      std::vector<uint32_t> got;
      const MsTopKStats stats = mstopk<float>(x, k, got);
      ASSERT_EQ(got.size(), std::min(k, d)) << "d=" << d << " k=" << k;
      ASSERT_TRUE(std::is_sorted(got.begin(), got.end()));
      ASSERT_EQ(std::adjacent_find(got.begin(), got.end()), got.end()) << "duplicate index";
      std::set<uint32_t> chosen(got.begin(), got.end());
      size_t above = 0;
      for (uint32_t i = 0; i < d; ++i) {
        const double a = std::fabs(static_cast<double>(x[i]));
        if (a >= stats.threshold_high) {
          EXPECT_TRUE(chosen.count(i)) << "element at or above t1 left out";
          ++above;
        }
        if (chosen.count(i)) {
          EXPECT_GE(a, stats.threshold_low) << "element under t2 selected";
        }
      }
      EXPECT_EQ(above, stats.above_high);
    }
  }
}

TEST(MsTopK, EdgeCounts) {
  const auto x = gaussian(100, 3);
  std::vector<uint32_t> got;
  mstopk<float>(x, 0, got);
  EXPECT_TRUE(got.empty());
  mstopk<float>(x, 100, got);
  EXPECT_EQ(got.size(), 100u);
  mstopk<float>(x, 1000, got);  // more than there are: all of them
  EXPECT_EQ(got.size(), 100u);
  mstopk<float>(std::span<const float>(), 5, got);
  EXPECT_TRUE(got.empty());
}

TEST(MsTopK, TiesAtTheThresholdTakenByPositionFromBandStart) {
  const std::vector<float> x(100, -2.5f);  // all tied: the whole vector is the band
  std::vector<uint32_t> got;
  mstopk<float>(x, 5, got);
  EXPECT_EQ(got, (std::vector<uint32_t>{0, 1, 2, 3, 4}));
  mstopk<float>(x, 5, got, MsTopKOptions{30, 98});  // wraps around the band's end
  EXPECT_EQ(got, (std::vector<uint32_t>{0, 1, 2, 98, 99}));
  mstopk<float>(x, 3, got, MsTopKOptions{30, 140});  // band_start taken modulo the band
  EXPECT_EQ(got, (std::vector<uint32_t>{40, 41, 42}));
}

TEST(MsTopK, ClearOutliersAreAlwaysSelected) {
  std::vector<float> x(10000, 0.001f);
  x[17] = 50;
  x[9000] = -40;
  x[4242] = 30;
  std::vector<uint32_t> got;
  mstopk<float>(x, 3, got);
  EXPECT_EQ(got, (std::vector<uint32_t>{17, 4242, 9000}));
}

TEST(MsTopK, RecallAgainstExactOnGaussianData) {
  const auto x = gaussian(1 << 20, 5);
  for (double density : {0.001, 0.01}) {
    const size_t k = static_cast<size_t>(density * static_cast<double>(x.size()));
    std::vector<uint32_t> got, exact;
    mstopk<float>(x, k, got);
    exact_topk<float>(x, k, exact);
    EXPECT_GE(recall(got, exact), 0.9) << "density " << density;
  }
}

TEST(MsTopK, DoubleMatchesFloatOnTheSameValues) {
  const auto x = gaussian(5000, 9);
  const std::vector<double> y(x.begin(), x.end());
  std::vector<uint32_t> from_float, from_double;
  mstopk<float>(x, 50, from_float);
  mstopk<double>(y, 50, from_double);
  EXPECT_EQ(from_float, from_double);
}

// mstopk starts its search from a floor read off a sample of large vectors and falls back to
// the whole vector where that floor would change the result. Whatever the data, the selection
// must be Algorithm 1's: compared with the plain reference on vectors built to defeat the
// sample (large values only between the sampled chunks, ties, NaNs, a sorted ramp, heavy tails).
TEST(MsTopK, SameSelectionAsThePlainAlgorithmOnHostileVectors) {
  const size_t d = (size_t{1} << 20) + 4099;  // large enough to be sampled
  std::mt19937 rng(20261123);
  std::vector<std::pair<const char*, std::vector<float>>> cases;
  cases.emplace_back("gaussian", gaussian(d, 1));
  {
    auto x = gaussian(d, 2);  // big values only away from the 64 evenly spaced sampled chunks
    for (size_t i = 0; i < d; ++i) x[i] *= 0.001f;
    const size_t stride = (d - 1024) / 63;
    for (size_t i = 0; i < d; ++i)
      if (i % stride > 2048 && i % stride < stride - 2048 && i % 97 == 0) x[i] = 5.0f + float(i % 13);
    cases.emplace_back("large values between the sampled chunks", std::move(x));
  }
  {
    auto x = gaussian(d, 3);  // big values only inside the sampled chunks: the floor too low
    const size_t stride = (d - 1024) / 63;
    for (size_t i = 0; i < d; ++i) x[i] = (i % stride < 1024) ? x[i] * 100 : x[i] * 0.01f;
    cases.emplace_back("large values inside the sampled chunks", std::move(x));
  }
  {
    std::vector<float> x(d);  // few distinct magnitudes: thresholds land on ties
    for (float& v : x) v = float(rng() % 5) * ((rng() & 1) ? 1.0f : -1.0f);
    cases.emplace_back("five values, many ties", std::move(x));
  }
  {
    auto x = gaussian(d, 4);
    for (size_t i = 0; i < d; i += 1001) x[i] = std::numeric_limits<float>::quiet_NaN();
    cases.emplace_back("NaNs", std::move(x));
  }
  {
    std::vector<float> x(d);
    for (size_t i = 0; i < d; ++i) x[i] = float(i);
    cases.emplace_back("sorted ramp", std::move(x));
  }
  {
    std::cauchy_distribution<float> cauchy(0.0f, 1.0f);
    std::vector<float> x(d);
    for (float& v : x) v = cauchy(rng);
    cases.emplace_back("Cauchy (heavy tails)", std::move(x));
  }
  cases.emplace_back("all equal", std::vector<float>(d, 0.25f));
  for (const auto& [name, x] : cases) {
    for (double density : {0.0001, 0.001, 0.01, 0.05}) {
      const size_t k = static_cast<size_t>(density * static_cast<double>(d));
      for (uint64_t band_start : {uint64_t{0}, uint64_t{7919}}) {
        const MsTopKOptions options{30, band_start};
        std::vector<uint32_t> got;
        const MsTopKStats stats = mstopk<float>(x, k, got, options);
        MsTopKStats expected;
        EXPECT_EQ(got, reference_mstopk(x, k, options, &expected))
            << name << ", density " << density << ", band_start " << band_start;
        // The thresholds agree to rounding: mstopk sums |x| in float lanes, the reference in
        // double, so their means (and the thresholds built on them) differ in the last bits.
        auto near = [](double a, double b) { return a == b || std::fabs(a - b) <= 1e-5 * std::fabs(b); };
        EXPECT_TRUE(near(stats.threshold_high, expected.threshold_high))
            << name << ", density " << density << ": t1 " << stats.threshold_high << " vs "
            << expected.threshold_high;
        EXPECT_TRUE(near(stats.threshold_low, expected.threshold_low))
            << name << ", density " << density << ": t2 " << stats.threshold_low << " vs "
            << expected.threshold_low;
        EXPECT_EQ(stats.above_high, expected.above_high) << name << ", density " << density;
      }
    }
  }
  const std::vector<double> y(cases[0].second.begin(), cases[0].second.end());
  std::vector<uint32_t> got;
  mstopk<double>(y, 1000, got);
  EXPECT_EQ(got, reference_mstopk(y, 1000, MsTopKOptions{}));
}

TEST(MsTopK, OnePassOverGaussianData) {
  const auto x = gaussian((size_t{1} << 22), 8);
  for (double density : {0.001, 0.01}) {
    std::vector<uint32_t> got;
    const MsTopKStats stats = mstopk<float>(x, static_cast<size_t>(density * x.size()), got);
    EXPECT_EQ(stats.full_passes, 1u) << "density " << density;  // the sampled floor served
  }
}

TEST(ExactTopK, MatchesAFullSortIncludingTies) {
  auto x = gaussian(3000, 21);
  for (size_t i = 0; i < x.size(); i += 7) x[i] = (i % 2) ? 1.5f : -1.5f;  // many ties
  for (size_t k : {1u, 10u, 300u, 500u, 3000u}) {
    std::vector<uint32_t> got;
    exact_topk<float>(x, k, got);
    EXPECT_EQ(got, reference_topk(x, k)) << "k=" << k;
  }
}

}  // namespace
}  // namespace flexplan::sparse
