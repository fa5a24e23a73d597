// MSTopK's selection semantics (sparse/mstopk.hpp) and the exact top-k it is measured against.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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
