// MSTopK (threshold bisection around the mean magnitude) and the exact top-k baseline.
//
// Speed on a CPU: Algorithm 1 counts |x| >= threshold over the whole vector N times. Here each
// count over the whole vector also records the indices it counted, and once a count exceeds k
// every later count, and the final selection, run over those candidates only: the thresholds
// tried later all lie above that one, so nothing outside can be selected. The selection is
// Algorithm 1's; only the work differs (2-3 passes over the vector instead of N + 2).
#include "sparse/mstopk.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace flexplan::sparse {
namespace {

template <typename T>
void check_size(std::span<const T> x) {
  if (x.size() > std::numeric_limits<uint32_t>::max())
    throw std::invalid_argument("top-k: at most 2^32-1 elements per selection (32-bit indices)");
}

}  // namespace

template <typename T>
MsTopKStats mstopk(std::span<const T> x, size_t k, std::vector<uint32_t>& indices,
                   const MsTopKOptions& options) {
  check_size(x);
  indices.clear();
  MsTopKStats stats;
  const size_t d = x.size();
  k = std::min(k, d);
  stats.threshold_high = std::numeric_limits<double>::infinity();
  if (k == 0) return stats;
  if (k == d) {  // everything: no search needed
    indices.resize(d);
    for (size_t i = 0; i < d; ++i) indices[i] = static_cast<uint32_t>(i);
    stats.threshold_high = 0;
    stats.above_high = d;
    return stats;
  }

  // Mean and max of |x|: lanes of partial sums and maxima that the compiler vectorises,
  // folded into a double per block so that the mean keeps its precision. NaNs are counted and
  // left out only when the fast pass saw one.
  constexpr size_t kLanes = 16, kBlock = 4096;
  double sum = 0;
  T top_lanes[kLanes] = {};
  for (size_t block = 0; block < d; block += kBlock) {
    const size_t end = std::min(d, block + kBlock);
    T sums[kLanes] = {};
    size_t i = block;
    for (; i + kLanes <= end; i += kLanes) {
      for (size_t lane = 0; lane < kLanes; ++lane) {
        const T a = std::fabs(x[i + lane]);
        sums[lane] += a;
        top_lanes[lane] = top_lanes[lane] > a ? top_lanes[lane] : a;
      }
    }
    for (; i < end; ++i) {
      const T a = std::fabs(x[i]);
      sums[0] += a;
      top_lanes[0] = top_lanes[0] > a ? top_lanes[0] : a;
    }
    for (T partial : sums) sum += static_cast<double>(partial);
  }
  double top = 0;
  for (T lane : top_lanes) top = std::max(top, static_cast<double>(lane));
  size_t nans = 0;
  if (std::isnan(sum)) {  // rare: redo the pass leaving NaNs out
    sum = 0;
    top = 0;
    for (size_t i = 0; i < d; ++i) {
      const double a = std::fabs(static_cast<double>(x[i]));
      if (std::isnan(a)) {
        ++nans;
        continue;
      }
      sum += a;
      top = std::max(top, a);
    }
  }
  stats.full_passes = 1;
  const double mean = d > nans ? sum / static_cast<double>(d - nans) : 0.0;

  double low = 0, high = 1;
  size_t k1 = 0, k2 = d - nans;
  T t1 = std::numeric_limits<T>::infinity(), t2 = 0;

  // Candidates: indices whose |x| is at least the lowest threshold that counted more than k,
  // once one did (ascending), with their magnitudes beside them.
  std::vector<uint32_t> candidates;
  std::vector<T> magnitudes;
  bool compacted = false;

  for (int it = 0; it < options.iterations; ++it) {
    const double ratio = low + (high - low) / 2;
    // Compared in T, so the threshold is T's rounding of Algorithm 1's.
    const T threshold = static_cast<T>(mean + ratio * (top - mean));
    size_t count = 0;
    if (!compacted) {
      // Blocks of 32: a vectorised count, then the indices only from blocks with any.
      candidates.clear();
      constexpr size_t kCountBlock = 32;
      size_t i = 0;
      for (; i + kCountBlock <= d; i += kCountBlock) {
        unsigned in_block = 0;
        for (size_t j = i; j < i + kCountBlock; ++j) in_block += std::fabs(x[j]) >= threshold;
        if (in_block == 0) continue;
        for (size_t j = i; j < i + kCountBlock; ++j)
          if (std::fabs(x[j]) >= threshold) candidates.push_back(static_cast<uint32_t>(j));
      }
      for (; i < d; ++i)
        if (std::fabs(x[i]) >= threshold) candidates.push_back(static_cast<uint32_t>(i));
      count = candidates.size();
      ++stats.full_passes;
      if (count > k) {
        magnitudes.resize(count);
        for (size_t c = 0; c < count; ++c) magnitudes[c] = std::fabs(x[candidates[c]]);
        compacted = true;
      }
    } else {
      for (T a : magnitudes) count += a >= threshold;
      if (count > k) {  // narrow the candidates to this threshold's, keeping their order
        size_t kept = 0;
        for (size_t c = 0; c < magnitudes.size(); ++c) {
          candidates[kept] = candidates[c];
          magnitudes[kept] = magnitudes[c];
          kept += magnitudes[c] >= threshold;
        }
        candidates.resize(kept);
        magnitudes.resize(kept);
      }
    }
    if (count <= k) {
      high = ratio;
      if (count > k1) {  // a count of 0 leaves t1 at +inf: nothing above it
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

  // Everything at or above t1, then k - k1 of the band [t2, t1) from band_start on.
  const size_t band = k2 - k1;
  const size_t need = k - k1;
  const size_t start = band == 0 ? 0 : options.band_start % band;
  indices.reserve(k);
  size_t band_rank = 0;
  auto consider = [&](uint32_t index, T a) {
    if (a >= t1) {
      indices.push_back(index);
    } else if (a >= t2) {
      const size_t from_start = band_rank >= start ? band_rank - start : band_rank + band - start;
      if (from_start < need) indices.push_back(index);
      ++band_rank;
    }
  };
  if (compacted) {
    for (size_t c = 0; c < candidates.size(); ++c) consider(candidates[c], magnitudes[c]);
  } else {
    for (size_t i = 0; i < d; ++i)
      consider(static_cast<uint32_t>(i), std::fabs(x[i]));
    ++stats.full_passes;
  }
  return stats;
}

template <typename T>
void exact_topk(std::span<const T> x, size_t k, std::vector<uint32_t>& indices) {
  check_size(x);
  indices.clear();
  k = std::min(k, x.size());
  if (k == 0) return;
  std::vector<T> magnitudes(x.size());
  for (size_t i = 0; i < x.size(); ++i) magnitudes[i] = std::fabs(x[i]);
  std::nth_element(magnitudes.begin(), magnitudes.begin() + static_cast<ptrdiff_t>(k - 1),
                   magnitudes.end(), std::greater<T>());
  const T kth = magnitudes[k - 1];
  size_t above = 0;
  for (size_t i = 0; i < k; ++i) above += magnitudes[i] > kth;
  size_t ties_left = k - above;
  indices.reserve(k);
  for (size_t i = 0; i < x.size(); ++i) {
    const T a = std::fabs(x[i]);
    if (a > kth) {
      indices.push_back(static_cast<uint32_t>(i));
    } else if (a == kth && ties_left > 0) {
      indices.push_back(static_cast<uint32_t>(i));
      --ties_left;
    }
  }
}

template MsTopKStats mstopk<float>(std::span<const float>, size_t, std::vector<uint32_t>&,
                                   const MsTopKOptions&);
template MsTopKStats mstopk<double>(std::span<const double>, size_t, std::vector<uint32_t>&,
                                    const MsTopKOptions&);
template void exact_topk<float>(std::span<const float>, size_t, std::vector<uint32_t>&);
template void exact_topk<double>(std::span<const double>, size_t, std::vector<uint32_t>&);

}  // namespace flexplan::sparse
