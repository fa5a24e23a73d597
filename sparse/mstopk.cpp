// MSTopK (threshold bisection around the mean magnitude) and the exact top-k baseline.
//
// Speed on a CPU: Algorithm 1 counts |x| >= threshold over the whole vector N times. Here the
// search runs over candidates: the indices whose |x| is at least a floor that a small sample
// puts a little under the k-th magnitude, collected in the same pass that finds the mean and
// the maximum. Every threshold at or above the floor is counted exactly over the candidates;
// one under it counts more than k (at least the candidates), which is all the bisection needs.
// Where the floor would change the result (the search ends under it, or a tie makes t2
// ambiguous) the search is redone over the whole vector: each count that exceeds k then
// becomes the new candidate set. The selection is Algorithm 1's; only the work differs (one
// pass over the vector on Gaussian-like data, instead of N + 2).
#include "sparse/mstopk.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace flexplan::sparse {
namespace {

template <typename T>
void check_size(std::span<const T> x) {
  if (x.size() > std::numeric_limits<uint32_t>::max())
    throw std::invalid_argument("top-k: at most 2^32-1 elements per selection (32-bit indices)");
}

// 16-byte vectors of T (GCC and Clang vector extensions: SSE2 on x86-64, NEON on arm64) for the
// one pass over the whole vector; the compilers leave the equivalent lane loops scalar.
template <typename T>
struct Vec16;
template <>
struct Vec16<float> {
  typedef float V __attribute__((vector_size(16)));
  typedef int32_t M __attribute__((vector_size(16)));
  static constexpr int32_t kMagnitudeBits = 0x7fffffff;  // all but the sign
};
template <>
struct Vec16<double> {
  typedef double V __attribute__((vector_size(16)));
  typedef int64_t M __attribute__((vector_size(16)));
  static constexpr int64_t kMagnitudeBits = 0x7fffffffffffffff;
};

// A magnitude `floor` such that a little more than k elements have |x| >= floor, read from an
// evenly spread sample of the vector: 0 (no floor) when the vector is too small for a sample to
// pay, or k too large a share of it. Only speed depends on it: too high (fewer than k at or
// above it, or above the search's last threshold that counts more than k) costs a search over
// the whole vector; too low costs more candidates.
template <typename T>
T sample_floor(std::span<const T> x, size_t k) {
  constexpr size_t kChunks = 64, kChunk = 1024, kSample = kChunks * kChunk;
  const size_t d = x.size();
  if (d < 16 * kSample) return 0;
  // Sample rank: the expected count of the top k in the sample plus five of its standard
  // deviations (binomial, about sqrt), plus slack for small counts.
  const double expected = static_cast<double>(k) * kSample / static_cast<double>(d);
  const size_t rank = static_cast<size_t>(1.05 * expected + 5 * std::sqrt(expected) + 16);
  if (rank >= kSample / 4) return 0;
  std::vector<T> sample;
  sample.reserve(kSample);
  for (size_t c = 0; c < kChunks; ++c) {
    const size_t from = c * (d - kChunk) / (kChunks - 1);
    for (size_t i = from; i < from + kChunk; ++i) {
      const T a = std::fabs(x[i]);
      sample.push_back(std::isnan(a) ? T(0) : a);
    }
  }
  std::nth_element(sample.begin(), sample.begin() + static_cast<ptrdiff_t>(rank), sample.end(),
                   std::greater<T>());
  return sample[rank];
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

  // Candidates: indices whose |x| is at least `floor` (ascending), with their magnitudes beside
  // them, once `compacted`: a count over them is then exact for every threshold >= floor, and
  // any threshold below floor counts more than k.
  std::vector<uint32_t> candidates;
  std::vector<T> magnitudes;
  bool compacted = false;
  T floor = sample_floor(x, k);
  // Appends the indices in [from, to) whose |x| >= at_least, and their magnitudes, while x[from,
  // to) is still in cache: written unconditionally, kept by advancing the end (no branch to
  // mispredict where about half the elements count). The vectors run ahead of `held`, grown
  // (doubling) before a block that might not fit.
  size_t held = 0;
  auto collect_block = [&](size_t from, size_t to, T at_least) {
    if (candidates.size() < held + (to - from)) {
      candidates.resize(2 * (held + (to - from)) + 1024);
      magnitudes.resize(candidates.size());
    }
    for (size_t j = from; j < to; ++j) {
      const T a = std::fabs(x[j]);
      candidates[held] = static_cast<uint32_t>(j);
      magnitudes[held] = a;
      held += a >= at_least;
    }
  };

  // One pass: mean and max of |x| (partial sums in vector lanes, folded into a double per
  // block of 4096 so that the mean keeps its precision), and the candidates at or above the
  // sampled floor (each block of 32's maximum decides whether its indices are collected). A NaN
  // poisons the sum (and may hide a block's maximum): the pass is then redone leaving NaNs out
  // and the floor dropped.
  using V = typename Vec16<T>::V;
  using M = typename Vec16<T>::M;
  constexpr size_t kWidth = 16 / sizeof(T), kCountBlock = 32, kBlock = 4096;
  static_assert(kBlock % kCountBlock == 0 && kCountBlock % (4 * kWidth) == 0);
  const T collect_at = floor > 0 ? floor : std::numeric_limits<T>::infinity();
  const M magnitude_bits = M{} + Vec16<T>::kMagnitudeBits;
  auto magnitude = [&](const T* at) {
    V v;
    std::memcpy(&v, at, sizeof v);
    return reinterpret_cast<V>(reinterpret_cast<M>(v) & magnitude_bits);
  };
  auto larger = [](V a, V b) {
    const M a_wins = a > b;
    return reinterpret_cast<V>((reinterpret_cast<M>(a) & a_wins) | (reinterpret_cast<M>(b) & ~a_wins));
  };
  double sum = 0;
  V top_lanes = {};
  T tail_top = 0;  // of the elements after each 4096 block's last whole block of 32
  for (size_t block = 0; block < d; block += kBlock) {
    const size_t end = std::min(d, block + kBlock);
    V sums[4] = {};
    size_t i = block;
    for (; i + kCountBlock <= end; i += kCountBlock) {
      V block_top[2] = {};
      for (size_t v = 0; v < kCountBlock / kWidth; v += 4) {
        for (size_t u = 0; u < 4; ++u) {
          const V a = magnitude(&x[i + (v + u) * kWidth]);
          sums[u] += a;
          block_top[u % 2] = larger(block_top[u % 2], a);
        }
      }
      const V block_max = larger(block_top[0], block_top[1]);
      top_lanes = larger(top_lanes, block_max);
      const M hit = block_max >= (V{} + collect_at);
      bool any = false;
      for (size_t lane = 0; lane < kWidth; ++lane) any |= hit[lane] != 0;
      if (any) collect_block(i, i + kCountBlock, collect_at);
    }
    T tail_sum = 0;
    for (size_t tail = i; tail < end; ++tail) {
      const T a = std::fabs(x[tail]);
      tail_sum += a;
      tail_top = tail_top > a ? tail_top : a;
    }
    if (i < end) collect_block(i, end, collect_at);
    sum += static_cast<double>(tail_sum);
    for (const V& lanes : sums)
      for (size_t lane = 0; lane < kWidth; ++lane) sum += static_cast<double>(lanes[lane]);
  }
  double top = static_cast<double>(tail_top);
  for (size_t lane = 0; lane < kWidth; ++lane) top = std::max(top, static_cast<double>(top_lanes[lane]));
  size_t nans = 0;
  if (std::isnan(sum)) {  // rare: redo the pass leaving NaNs out
    floor = 0;
    held = 0;
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
  const size_t at_floor = held;
  candidates.resize(held);
  magnitudes.resize(held);
  if (floor > 0 && at_floor > k) compacted = true;

  double low = 0, high = 1;
  size_t k1 = 0, k2 = d - nans;
  T t1 = std::numeric_limits<T>::infinity(), t2 = 0;

  // Algorithm 1's bisection. Started from the sampled floor it returns false where the floor
  // would make its result differ from a search over the whole vector: the last threshold that
  // counted more than k lies under the floor (its count and band are not among the
  // candidates), or one above it counted exactly the candidates while one under it was only
  // known to count more (which of the two is t2 needs the uncounted ones).
  auto bisect = [&]() -> bool {
    const bool from_sample = compacted;
    bool under_floor_pending = false;
    for (int it = 0; it < options.iterations; ++it) {
      const double ratio = low + (high - low) / 2;
      // Compared in T, so the threshold is T's rounding of Algorithm 1's.
      const T threshold = static_cast<T>(mean + ratio * (top - mean));
      if (compacted && threshold < floor) {  // counts more than k: at least the candidates
        low = ratio;
        under_floor_pending = true;
        continue;
      }
      size_t count = 0;
      if (!compacted) {
        held = 0;
        size_t i = 0;
        for (; i + kCountBlock <= d; i += kCountBlock) {
          unsigned in_block = 0;
          for (size_t j = i; j < i + kCountBlock; ++j) in_block += std::fabs(x[j]) >= threshold;
          if (in_block != 0) collect_block(i, i + kCountBlock, threshold);
        }
        collect_block(i, d, threshold);
        count = held;
        candidates.resize(held);
        magnitudes.resize(held);
        ++stats.full_passes;
        if (count > k) {
          compacted = true;
          floor = threshold;
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
        if (from_sample && under_floor_pending && count == at_floor) return false;
        under_floor_pending = false;
        low = ratio;
        if (count < k2) {
          k2 = count;
          t2 = threshold;
        }
      }
    }
    // No count above k at all leaves the band [0, t1): the whole vector.
    return !from_sample || (!under_floor_pending && t2 >= floor && k2 < d - nans);
  };
  if (!bisect()) {  // the sample's floor did not serve: search the whole vector, as Algorithm 1
    low = 0, high = 1, k1 = 0, k2 = d - nans;
    t1 = std::numeric_limits<T>::infinity(), t2 = 0;
    compacted = false;
    floor = 0;
    candidates.clear();
    magnitudes.clear();
    bisect();
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
