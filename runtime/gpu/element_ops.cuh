// Element arithmetic shared by the CUDA kernels (device_kernels.cu, fold_server.cu), equal bit
// for bit to the host runtime's (runtime/reduce_kernels.hpp): integer sum and prod wrap, min and
// max pick as std::min/std::max, 16-bit floats combine in float and round back once.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "runtime/datatype.hpp"

namespace flexplan::gpu {

template <typename T>
struct Arith {
  __device__ static T combine(T a, T b, ReduceOp op) {
    switch (op) {
      case ReduceOp::Prod: return a * b;
      case ReduceOp::Min: return b < a ? b : a;  // as std::min: a on ties, -0/+0 and NaN alike
      case ReduceOp::Max: return a < b ? b : a;  // as std::max
      default: return a + b;
    }
  }
};
// Integer sum and prod wrap: compute in the unsigned type.
template <typename T, typename U>
struct WrapArith {
  __device__ static T combine(T a, T b, ReduceOp op) {
    switch (op) {
      case ReduceOp::Prod: return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
      case ReduceOp::Min: return b < a ? b : a;  // as std::min: a on ties, -0/+0 and NaN alike
      case ReduceOp::Max: return a < b ? b : a;  // as std::max
      default: return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    }
  }
};

// Conversions of 16-bit floats, with NaN encoded as runtime/half.hpp does (the sign kept, a
// quiet NaN; bfloat16 keeps the payload's top bits): CUDA's intrinsics make every NaN canonical,
// which made min/max of NaN differ from the host by their bits (found on an H100).
__device__ inline float h2f(__half h) {
  const unsigned bits = __half_as_ushort(h);
  if ((bits & 0x7c00u) == 0x7c00u && (bits & 0x3ffu)) return __uint_as_float(((bits & 0x8000u) << 16) | 0x7f800000u | ((bits & 0x3ffu) << 13));
  return __half2float(h);
}
__device__ inline __half f2h(float f) {
  if (isnan(f)) return __ushort_as_half(static_cast<unsigned short>(((__float_as_uint(f) >> 16) & 0x8000u) | 0x7e00u));
  return __float2half_rn(f);
}
__device__ inline float b2f(__nv_bfloat16 h) { return __uint_as_float(static_cast<unsigned>(__bfloat16_as_ushort(h)) << 16); }
__device__ inline __nv_bfloat16 f2b(float f) {
  if (isnan(f)) return __ushort_as_bfloat16(static_cast<unsigned short>((__float_as_uint(f) >> 16) | 0x40u));
  return __float2bfloat16_rn(f);
}

}  // namespace flexplan::gpu
