// MSTopK on a CUDA device, in six passes over x with no sort and one wait for the host: the
// mean and maximum of |x|; the threshold search, 10 bisection steps per pass, each pass a
// histogram over the thresholds those steps can try; then a count and a write pass that put
// the selected indices straight into place, ascending. Between passes, one-block kernels carry
// the search's state, so the host only enqueues.
#include "sparse/cuda/mstopk_cuda.hpp"

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

namespace flexplan::sparse {
namespace {

// A histogram pass answers this many bisection steps: 2^10 + 1 thresholds and counters fit in
// 8 KiB of shared memory, and a binary search over them takes 11 comparisons.
constexpr int kStepsPerPass = 10;
constexpr int kMaxThresholds = (1 << kStepsPerPass) + 1;
constexpr int kThreads = 256;
constexpr int kScanThreads = 1024;

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string("mstopk_cuda: ") + what + ": " + cudaGetErrorString(status));
}

// The search and selection state, on the device between kernels.
struct State {
  // What the host reads back, first, so that it copies only what was written.
  float t1, t2;
  unsigned long long k1;
  double mean, low, high;
  float top;
  unsigned long long nans, k2, k;
  int n;  // thresholds in use
  float thresholds[kMaxThresholds];
  unsigned long long counts[kMaxThresholds];
  // The band's window: ranks [start, end) and [0, wrapped), or all of it when every = 1.
  unsigned long long start, end, wrapped, every;
};

struct AbsStats {
  double sum;
  float max;
  unsigned long long nans;
};

// The threshold a ratio stands for, rounded as the CPU version rounds it (no fused multiply-add).
__device__ float threshold_at(const State& s, double ratio) {
  return __double2float_rn(__dadd_rn(s.mean, __dmul_rn(ratio, __dadd_rn(static_cast<double>(s.top), -s.mean))));
}

// Thresholds low + (high - low) m / 2^steps for m = 0 .. 2^steps, counters zeroed. The ratios
// are dyadic, so they equal the midpoints the bisection computes, bit for bit.
__device__ void prepare_level(State& s, int steps) {
  const int n = (1 << steps) + 1;
  for (int m = threadIdx.x; m < n; m += blockDim.x) {
    s.thresholds[m] = threshold_at(s, s.low + (s.high - s.low) * m / (n - 1));
    s.counts[m] = 0;
  }
  if (threadIdx.x == 0) s.n = n;
}

// Calls f(|x[i]|) for every element this thread owns in a grid-stride walk: 16-byte loads
// where x is 16-byte aligned (four times the bytes in flight of 4-byte loads: the passes are
// bound by memory latency otherwise), single loads for the rest.
template <typename F>
__device__ void for_each_magnitude(const float* x, size_t d, F&& f) {
  const size_t threads = size_t{gridDim.x} * blockDim.x, t = blockIdx.x * size_t{blockDim.x} + threadIdx.x;
  size_t scalar_from = 0;
  if ((reinterpret_cast<uintptr_t>(x) & 15) == 0) {
    const float4* v = reinterpret_cast<const float4*>(x);
    const size_t quads = d / 4;
    for (size_t j = t; j < quads; j += threads) {
      const float4 q = v[j];
      f(fabsf(q.x));
      f(fabsf(q.y));
      f(fabsf(q.z));
      f(fabsf(q.w));
    }
    scalar_from = quads * 4;
  }
  for (size_t i = scalar_from + t; i < d; i += threads) f(fabsf(x[i]));
}

// Per block: the sum and maximum of |x| and the count of NaNs (left out of both).
__global__ void __launch_bounds__(kThreads) abs_stats_blocks(const float* x, size_t d, AbsStats* partial) {
  double sum = 0;
  float top = 0;
  unsigned long long nans = 0;
  for_each_magnitude(x, d, [&](float a) {
    if (a == a) {
      sum += a;
      top = fmaxf(top, a);
    } else {
      ++nans;
    }
  });
  __shared__ double sums[kThreads];
  __shared__ float tops[kThreads];
  __shared__ unsigned long long nan_counts[kThreads];
  sums[threadIdx.x] = sum;
  tops[threadIdx.x] = top;
  nan_counts[threadIdx.x] = nans;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      sums[threadIdx.x] += sums[threadIdx.x + half];
      tops[threadIdx.x] = fmaxf(tops[threadIdx.x], tops[threadIdx.x + half]);
      nan_counts[threadIdx.x] += nan_counts[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = AbsStats{sums[0], tops[0], nan_counts[0]};
}

// One block: the blocks' partials reduced in a fixed order (the same thresholds on every
// call), the search started, the first level's thresholds.
__global__ void __launch_bounds__(kScanThreads) start_search(const AbsStats* partial, int blocks, size_t d, size_t k, int steps, State* state) {
  State& s = *state;
  double sum = 0;
  float top = 0;
  unsigned long long nans = 0;
  for (int b = threadIdx.x; b < blocks; b += blockDim.x) {
    sum += partial[b].sum;
    top = fmaxf(top, partial[b].max);
    nans += partial[b].nans;
  }
  __shared__ union {
    typename cub::BlockReduce<double, kScanThreads>::TempStorage sum;
    typename cub::BlockReduce<float, kScanThreads>::TempStorage top;
    typename cub::BlockReduce<unsigned long long, kScanThreads>::TempStorage nans;
  } temp;
  sum = cub::BlockReduce<double, kScanThreads>(temp.sum).Sum(sum);
  __syncthreads();
  top = cub::BlockReduce<float, kScanThreads>(temp.top).Reduce(top, [](float a, float b) { return fmaxf(a, b); });
  __syncthreads();
  nans = cub::BlockReduce<unsigned long long, kScanThreads>(temp.nans).Sum(nans);
  if (threadIdx.x == 0) {
    s.mean = d > nans ? sum / static_cast<double>(d - nans) : 0.0;
    s.top = top;
    s.nans = nans;
    s.low = 0;
    s.high = 1;
    s.k = k;
    s.k1 = 0;
    s.k2 = d - nans;
    s.t1 = __int_as_float(0x7f800000);  // +inf
    s.t2 = 0;
  }
  __syncthreads();
  if (steps > 0) prepare_level(s, steps);
}

// For every element with thresholds[0] <= |x|, the last threshold at or below |x| gets a count.
// The thresholds do not decrease; NaNs fail every comparison and count nowhere.
__global__ void __launch_bounds__(kThreads) threshold_histogram(const float* x, size_t d, State* state) {
  __shared__ float t[kMaxThresholds];
  __shared__ unsigned h[kMaxThresholds];
  const int n = state->n;
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    t[j] = state->thresholds[j];
    h[j] = 0;
  }
  __syncthreads();
  const float lowest = t[0], highest = t[n - 1];
  // The thresholds are an even grid but for rounding: an element's bin is guessed by arithmetic
  // and confirmed by two comparisons; a binary search settles the rest (an element at a bin's
  // rounded edge, or a grid finer than the floats' spacing, where thresholds tie).
  const float scale = highest > lowest ? (n - 1) / (highest - lowest) : 0.0f;
  for_each_magnitude(x, d, [&](float a) {
    if (!(a >= lowest)) return;
    if (a >= highest) {
      atomicAdd(&h[n - 1], 1u);
      return;
    }
    int lo = min(max(static_cast<int>((a - lowest) * scale), 0), n - 2);
    if (!(t[lo] <= a && a < t[lo + 1])) {
      lo = 0;
      int hi = n - 1;  // t[lo] <= a < t[hi]
      while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (t[mid] <= a) lo = mid;
        else hi = mid;
      }
    }
    atomicAdd(&h[lo], 1u);
  });
  __syncthreads();
  for (int j = threadIdx.x; j < n; j += blockDim.x)
    if (h[j] != 0) atomicAdd(&state->counts[j], static_cast<unsigned long long>(h[j]));
}

// One block: the level's bisection steps, as the CPU version takes them, then the next level's
// thresholds (when next_steps > 0).
__global__ void __launch_bounds__(kScanThreads) bisect(int steps, int next_steps, State* state) {
  State& s = *state;
  // Suffix sums: counts[j] becomes the number of elements with |x| >= thresholds[j]. Thread t
  // holds counts[n - 2 - t]; counts[n - 1] is added to all.
  __shared__ unsigned long long at_least[kMaxThresholds];
  __shared__ typename cub::BlockScan<unsigned long long, kScanThreads>::TempStorage temp;
  const int n = s.n;
  const int j = n - 2 - static_cast<int>(threadIdx.x);
  unsigned long long suffix;
  cub::BlockScan<unsigned long long, kScanThreads>(temp).InclusiveSum(j >= 0 ? s.counts[j] : 0ull, suffix);
  const unsigned long long top_count = s.counts[n - 1];
  if (j >= 0) at_least[j] = suffix + top_count;
  if (threadIdx.x == 0) at_least[n - 1] = top_count;
  __syncthreads();
  if (threadIdx.x == 0) {
    int lo = 0, hi = n - 1;
    for (int step = 0; step < steps; ++step) {
      const double ratio = s.low + (s.high - s.low) / 2;
      const int mid = (lo + hi) / 2;
      const unsigned long long count = at_least[mid];
      if (count <= s.k) {
        s.high = ratio;
        hi = mid;
        if (count > s.k1) {
          s.k1 = count;
          s.t1 = s.thresholds[mid];
        }
      } else {
        s.low = ratio;
        lo = mid;
        if (count < s.k2) {
          s.k2 = count;
          s.t2 = s.thresholds[mid];
        }
      }
    }
  }
  __syncthreads();
  if (next_steps > 0) prepare_level(s, next_steps);
}

// The window of the band: need = k - k1 of its elements, from rank band_start % band on,
// wrapping; all of them when the band has no more than need.
__global__ void choose_window(unsigned long long band_start, State* state) {
  State& s = *state;
  const unsigned long long band = s.k2 - s.k1, need = s.k - s.k1;
  s.every = need >= band;
  s.start = band == 0 ? 0 : band_start % band;
  s.end = s.start + need < band ? s.start + need : band;
  s.wrapped = need - (s.end - s.start);
}

// How many band elements of rank < r are in the window (the window's ranks below r).
__device__ unsigned long long window_before(const State& s, unsigned long long r) {
  if (s.every) return r;
  const unsigned long long tail = r < s.end ? r : s.end;
  return (r < s.wrapped ? r : s.wrapped) + (tail > s.start ? tail - s.start : 0);
}

// The compaction is done by warps, with no block-wide barrier: each warp owns one contiguous
// span of x, a multiple of 4 elements long, walked 128 elements at a time, each lane taking 4
// consecutive ones (one 16-byte load where x is 16-byte aligned).
constexpr int kWarpsPerBlock = kThreads / 32;
struct Span {
  size_t begin, end;
};
__device__ Span span_of(size_t d) {
  const size_t warps = size_t{gridDim.x} * kWarpsPerBlock, warp = blockIdx.x * size_t{kWarpsPerBlock} + threadIdx.x / 32;
  const size_t per = (d + warps * 4 - 1) / (warps * 4) * 4;
  const size_t begin = warp * per;
  return {begin < d ? begin : d, begin + per < d ? begin + per : d};
}
// |x[at]| .. |x[at + 3]| (0 past end, which the caller masks out).
__device__ void load_four(const float* x, size_t at, size_t end, bool aligned, float a[4]) {
  if (aligned && at + 4 <= end) {
    const float4 q = *reinterpret_cast<const float4*>(x + at);
    a[0] = fabsf(q.x), a[1] = fabsf(q.y), a[2] = fabsf(q.z), a[3] = fabsf(q.w);
    return;
  }
  for (int e = 0; e < 4; ++e) a[e] = at + e < end ? fabsf(x[at + e]) : 0.0f;
}

// Per warp: the count of above (|x| >= t1) and band (t2 <= |x| < t1) elements, packed 32:32.
__global__ void __launch_bounds__(kThreads) count_selected(const float* x, size_t d, const State* state,
                                                           unsigned long long* warp_counts) {
  const float t1 = state->t1, t2 = state->t2;
  const Span span = span_of(d);
  const unsigned lane = threadIdx.x % 32;
  const bool aligned = (reinterpret_cast<uintptr_t>(x) & 15) == 0;
  unsigned long long packed = 0;
  for (size_t at = span.begin + 4 * lane; at < span.end; at += 128) {
    float a[4];
    load_four(x, at, span.end, aligned, a);
    for (int e = 0; e < 4; ++e) {
      const bool inside = at + e < span.end;
      packed += (static_cast<unsigned long long>(inside && a[e] >= t1) << 32) | (inside && a[e] >= t2 && a[e] < t1);
    }
  }
  for (int offset = 16; offset > 0; offset /= 2) packed += __shfl_down_sync(0xffffffffu, packed, offset);
  if (lane == 0) warp_counts[blockIdx.x * size_t{kWarpsPerBlock} + threadIdx.x / 32] = packed;
}

// One block: the warps' counts become exclusive prefixes (above and band counts before each).
__global__ void __launch_bounds__(kScanThreads) scan_counts(unsigned long long* counts, int entries) {
  const int per = (entries + kScanThreads - 1) / kScanThreads;
  const int first = threadIdx.x * per, last = min(entries, first + per);
  unsigned long long mine = 0;
  for (int b = first; b < last; ++b) mine += counts[b];
  using Scan = cub::BlockScan<unsigned long long, kScanThreads>;
  __shared__ typename Scan::TempStorage temp;
  unsigned long long before;
  Scan(temp).ExclusiveSum(mine, before);
  for (int b = first; b < last; ++b) {
    const unsigned long long count = counts[b];
    counts[b] = before;
    before += count;
  }
}

// Each selected index goes to its place in the ascending output: the above elements before it
// plus the window's band elements before it.
__global__ void __launch_bounds__(kThreads) write_selected(const float* x, size_t d, const State* state,
                                                           const unsigned long long* warp_prefix, uint32_t* indices) {
  const State& s = *state;
  const float t1 = s.t1, t2 = s.t2;
  const Span span = span_of(d);
  const unsigned lane = threadIdx.x % 32;
  const unsigned long long prefix = warp_prefix[blockIdx.x * size_t{kWarpsPerBlock} + threadIdx.x / 32];
  unsigned long long above_before = prefix >> 32, band_before = prefix & 0xffffffffull;
  const bool aligned = (reinterpret_cast<uintptr_t>(x) & 15) == 0;
  for (size_t tile = span.begin; tile < span.end; tile += 128) {
    const size_t at = tile + 4 * lane;
    float a[4];
    load_four(x, at, span.end, aligned, a);
    bool is_above[4], is_band[4];
    unsigned mine = 0;  // above << 16 | band: at most 128 of each per tile
    for (int e = 0; e < 4; ++e) {
      const bool inside = at + e < span.end;
      is_above[e] = inside && a[e] >= t1;
      is_band[e] = inside && a[e] >= t2 && a[e] < t1;
      mine += (unsigned{is_above[e]} << 16) | unsigned{is_band[e]};
    }
    unsigned through = mine;  // inclusive prefix over the warp's lanes
    for (int offset = 1; offset < 32; offset *= 2) {
      const unsigned other = __shfl_up_sync(0xffffffffu, through, offset);
      if (lane >= static_cast<unsigned>(offset)) through += other;
    }
    const unsigned total = __shfl_sync(0xffffffffu, through, 31), before_in_tile = through - mine;
    unsigned long long above_rank = above_before + (before_in_tile >> 16);
    unsigned long long band_rank = band_before + (before_in_tile & 0xffff);
    for (int e = 0; e < 4; ++e) {
      if (is_above[e] || is_band[e]) {
        const unsigned long long w = window_before(s, band_rank);
        // Never past k: with infinities in x the search's counts and thresholds are NaN and
        // more elements than k can qualify; the first k of them, ascending, are kept.
        const unsigned long long at_position = above_rank + w;
        if ((is_above[e] || window_before(s, band_rank + 1) > w) && at_position < s.k)
          indices[at_position] = static_cast<uint32_t>(at + e);
      }
      above_rank += is_above[e];
      band_rank += is_band[e];
    }
    above_before += total >> 16;
    band_before += total & 0xffff;
  }
}

// indices[i] = i for every i < d.
__global__ void __launch_bounds__(kThreads) all_indices(uint32_t* indices, size_t d) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < d; i += size_t{gridDim.x} * blockDim.x)
    indices[i] = static_cast<uint32_t>(i);
}

// Eight blocks per SM, or fewer for small x: at least 16 elements a thread. Every block loads
// the level's 1,025 thresholds and adds its nonzero counters to the device's with atomics, so a
// block of 256 elements cost more than its reading: on an H200, 256K and 1M elements took 12-15%
// less time with a block per 4,096 (docs/sparse.md, CUDA).
constexpr size_t kMinElementsPerThread = 16;
int stream_blocks(size_t d) {
  int device = 0, sms = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  const size_t per_block = kThreads * kMinElementsPerThread;
  return static_cast<int>(std::max<size_t>(1, std::min<size_t>(size_t(sms) * 8, (d + per_block - 1) / per_block)));
}

}  // namespace

bool cuda_device_available() {
  int devices = 0;
  return cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
}

MsTopKStats mstopk_cuda(const float* x, size_t d, size_t k, uint32_t* indices, const MsTopKOptions& options) {
  if (d > std::numeric_limits<uint32_t>::max())
    throw std::invalid_argument("mstopk_cuda: at most 2^32-1 elements (32-bit indices)");
  MsTopKStats stats;
  stats.threshold_high = std::numeric_limits<double>::infinity();
  k = k < d ? k : d;
  if (k == 0) return stats;
  if (k == d) {  // everything, NaNs too, as the CPU version returns it: no search
    all_indices<<<stream_blocks(d), kThreads>>>(indices, d);
    check(cudaGetLastError(), "all_indices");
    check(cudaDeviceSynchronize(), "all_indices");
    stats.threshold_high = 0;
    stats.above_high = d;
    return stats;
  }
  const int blocks = stream_blocks(d);

  // One workspace: the state, the blocks' partials, the warps' counts. Stream-ordered
  // allocation takes it from the device's pool without waiting (cudaMalloc would cost more than
  // a pass over 16M elements, and cudaFree waits for the device).
  const size_t partial_at = (sizeof(State) + 255) / 256 * 256;
  const size_t counts_at = partial_at + (blocks * sizeof(AbsStats) + 255) / 256 * 256;
  const int warps = blocks * kWarpsPerBlock;
  char* workspace = nullptr;
  check(cudaMallocAsync(reinterpret_cast<void**>(&workspace), counts_at + warps * sizeof(unsigned long long), 0),
        "cudaMallocAsync");
  auto* state = reinterpret_cast<State*>(workspace);
  auto* partial = reinterpret_cast<AbsStats*>(workspace + partial_at);
  auto* warp_counts = reinterpret_cast<unsigned long long*>(workspace + counts_at);

  const int iterations = std::max(0, options.iterations);
  abs_stats_blocks<<<blocks, kThreads>>>(x, d, partial);
  start_search<<<1, kScanThreads>>>(partial, blocks, d, k, std::min(kStepsPerPass, iterations), state);
  stats.full_passes = 1;
  for (int done = 0; done < iterations;) {
    const int steps = std::min(kStepsPerPass, iterations - done);
    done += steps;
    threshold_histogram<<<blocks, kThreads>>>(x, d, state);
    bisect<<<1, kScanThreads>>>(steps, std::min(kStepsPerPass, iterations - done), state);
    ++stats.full_passes;
  }
  choose_window<<<1, 1>>>(options.band_start, state);
  count_selected<<<blocks, kThreads>>>(x, d, state, warp_counts);
  scan_counts<<<1, kScanThreads>>>(warp_counts, warps);
  write_selected<<<blocks, kThreads>>>(x, d, state, warp_counts, indices);
  stats.full_passes += 2;

  const cudaError_t launched = cudaGetLastError();
  State result;
  const cudaError_t copied =
      launched == cudaSuccess ? cudaMemcpy(&result, state, offsetof(State, mean), cudaMemcpyDeviceToHost) : launched;
  cudaFreeAsync(workspace, 0);
  check(launched, "launch");
  check(copied, "selection");
  stats.threshold_high = result.t1;
  stats.threshold_low = result.t2;
  stats.above_high = result.k1;
  return stats;
}

}  // namespace flexplan::sparse
