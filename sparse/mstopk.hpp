// MSTopK: approximate top-k selection by magnitude with a fixed number of threshold searches
// (no sort), and the exact top-k it is measured against. docs/sparse.md describes both.
//
// Selection semantics (the same for every element type):
//  - It returns exactly min(k, d) elements when the input is finite (NaN never selected; with
//    NaNs it may return fewer). With k >= d it returns every index, NaNs included, at once.
//  - Thresholds: after `iterations` bisection steps on ratio in [0, 1], threshold t(ratio) =
//    mean|x| + ratio * (max|x| - mean|x|), t1 is the threshold tried with the largest count
//    k1 <= k of elements |x| >= t1 (t1 = +inf, k1 = 0 if none was), and t2 the one with the
//    smallest count k2 > k (t2 = 0, k2 = d if none was).
//  - Every element with |x| >= t1 is selected; the remaining k - k1 come from the band
//    t2 <= |x| < t1, taken in index order starting at the band element `band_start % band_size`
//    and wrapping around. Elements tied at a threshold are therefore all in (at t1) or ranked by
//    position (at t2): ties never make the count differ from k.
//  - Indices come back in ascending order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "sparse/mstopk_types.hpp"

namespace flexplan::sparse {

// Appends the selected indices (ascending) to `indices` after clearing it.
template <typename T>
MsTopKStats mstopk(std::span<const T> x, size_t k, std::vector<uint32_t>& indices,
                   const MsTopKOptions& options = {});

// Exact top-k by magnitude: the k largest |x|, ties at the k-th value broken by lower index.
// Indices ascending. (std::nth_element on a copy of |x|, then one selecting pass.)
template <typename T>
void exact_topk(std::span<const T> x, size_t k, std::vector<uint32_t>& indices);

}  // namespace flexplan::sparse
