// The device kernels of the GPU backend (device_kernels.hpp) as CUDA kernels: grid-stride
// loops, one element per thread per iteration; 16-bit floats combine in float and round back.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <limits>

#include "runtime/gpu/device_kernels.hpp"
#include "runtime/gpu/element_ops.cuh"

namespace flexplan::gpu {
namespace {

constexpr int kThreads = 256;

int blocks_for(size_t n) {
  const size_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 65535 ? blocks : 65535);
}

template <typename T, typename A>
__global__ void combine_kernel(T* dst, const T* a, const T* b, size_t n, ReduceOp op) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dst[i] = A::combine(a[i], b[i], op);
}

template <typename H, float (*ToFloat)(H), H (*FromFloat)(float)>
__global__ void combine_half_kernel(H* dst, const H* a, const H* b, size_t n, ReduceOp op) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dst[i] = FromFloat(Arith<float>::combine(ToFloat(a[i]), ToFloat(b[i]), op));
}

template <typename T>
__global__ void fill_kernel(T* dst, size_t n, T value) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dst[i] = value;
}

// Wide is T for floats, and int64_t or uint64_t for integers: a divisor beyond the element
// type's range (avg of uint8 over 256 or more ranks) must stay exact, as on the host.
template <typename T, typename Wide>
__global__ void divide_kernel(T* buf, size_t n, Wide divisor) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    buf[i] = static_cast<T>(static_cast<Wide>(buf[i]) / divisor);
}

template <typename H, float (*ToFloat)(H), H (*FromFloat)(float)>
__global__ void divide_half_kernel(H* buf, size_t n, float divisor) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    buf[i] = FromFloat(ToFloat(buf[i]) / divisor);
}

template <typename T>
void fill_as(void* dst, size_t n, T value, cudaStream_t stream) {
  fill_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<T*>(dst), n, value);
}

template <typename T>
T identity_of(ReduceOp op, T lowest, T highest) {
  switch (op) {
    case ReduceOp::Prod: return T(1);
    case ReduceOp::Min: return highest;
    case ReduceOp::Max: return lowest;
    default: return T(0);
  }
}

}  // namespace

void fill_identity(void* dst, size_t n, DataType type, ReduceOp op, cudaStream_t stream) {
  if (n == 0) return;
  const float inf = std::numeric_limits<float>::infinity();
  switch (type) {
    case DataType::Float32: return fill_as<float>(dst, n, identity_of<float>(op, -inf, inf), stream);
    case DataType::Float64: return fill_as<double>(dst, n, identity_of<double>(op, -double(inf), double(inf)), stream);
    case DataType::Float16: {
      const uint16_t bits = op == ReduceOp::Prod ? 0x3c00 : op == ReduceOp::Min ? 0x7c00 : op == ReduceOp::Max ? 0xfc00 : 0;
      return fill_as<uint16_t>(dst, n, bits, stream);
    }
    case DataType::BFloat16: {
      const uint16_t bits = op == ReduceOp::Prod ? 0x3f80 : op == ReduceOp::Min ? 0x7f80 : op == ReduceOp::Max ? 0xff80 : 0;
      return fill_as<uint16_t>(dst, n, bits, stream);
    }
    case DataType::Int32: return fill_as<int32_t>(dst, n, identity_of<int32_t>(op, INT32_MIN, INT32_MAX), stream);
    case DataType::Int64: return fill_as<int64_t>(dst, n, identity_of<int64_t>(op, INT64_MIN, INT64_MAX), stream);
    case DataType::UInt8: return fill_as<uint8_t>(dst, n, identity_of<uint8_t>(op, 0, 255), stream);
  }
}

void divide(void* buf, size_t n, DataType type, uint64_t divisor, cudaStream_t stream) {
  if (n == 0) return;
  const int g = blocks_for(n);
  switch (type) {
    case DataType::Float32: divide_kernel<float, float><<<g, kThreads, 0, stream>>>(static_cast<float*>(buf), n, float(divisor)); return;
    case DataType::Float64: divide_kernel<double, double><<<g, kThreads, 0, stream>>>(static_cast<double*>(buf), n, double(divisor)); return;
    case DataType::Float16: divide_half_kernel<__half, h2f, f2h><<<g, kThreads, 0, stream>>>(static_cast<__half*>(buf), n, float(divisor)); return;
    case DataType::BFloat16: divide_half_kernel<__nv_bfloat16, b2f, f2b><<<g, kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(buf), n, float(divisor)); return;
    case DataType::Int32: divide_kernel<int32_t, int64_t><<<g, kThreads, 0, stream>>>(static_cast<int32_t*>(buf), n, int64_t(divisor)); return;
    case DataType::Int64: divide_kernel<int64_t, int64_t><<<g, kThreads, 0, stream>>>(static_cast<int64_t*>(buf), n, int64_t(divisor)); return;
    case DataType::UInt8: divide_kernel<uint8_t, uint64_t><<<g, kThreads, 0, stream>>>(static_cast<uint8_t*>(buf), n, uint64_t(divisor)); return;
  }
}

void combine(void* dst, const void* a, const void* b, size_t n, DataType type, ReduceOp op, cudaStream_t stream) {
  if (n == 0) return;
  const int g = blocks_for(n);
  switch (type) {
    case DataType::Float32:
      combine_kernel<float, Arith<float>><<<g, kThreads, 0, stream>>>(static_cast<float*>(dst), static_cast<const float*>(a), static_cast<const float*>(b), n, op);
      return;
    case DataType::Float64:
      combine_kernel<double, Arith<double>><<<g, kThreads, 0, stream>>>(static_cast<double*>(dst), static_cast<const double*>(a), static_cast<const double*>(b), n, op);
      return;
    case DataType::Float16:
      combine_half_kernel<__half, h2f, f2h><<<g, kThreads, 0, stream>>>(static_cast<__half*>(dst), static_cast<const __half*>(a), static_cast<const __half*>(b), n, op);
      return;
    case DataType::BFloat16:
      combine_half_kernel<__nv_bfloat16, b2f, f2b><<<g, kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(dst), static_cast<const __nv_bfloat16*>(a), static_cast<const __nv_bfloat16*>(b), n, op);
      return;
    case DataType::Int32:
      combine_kernel<int32_t, WrapArith<int32_t, uint32_t>><<<g, kThreads, 0, stream>>>(static_cast<int32_t*>(dst), static_cast<const int32_t*>(a), static_cast<const int32_t*>(b), n, op);
      return;
    case DataType::Int64:
      combine_kernel<int64_t, WrapArith<int64_t, uint64_t>><<<g, kThreads, 0, stream>>>(static_cast<int64_t*>(dst), static_cast<const int64_t*>(a), static_cast<const int64_t*>(b), n, op);
      return;
    case DataType::UInt8:
      combine_kernel<uint8_t, WrapArith<uint8_t, uint8_t>><<<g, kThreads, 0, stream>>>(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(a), static_cast<const uint8_t*>(b), n, op);
      return;
  }
}

bool kernels_on_device() { return true; }

}  // namespace flexplan::gpu
