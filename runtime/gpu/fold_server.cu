// The fold server as a CUDA kernel (fold_server.hpp): a few co-resident blocks; thread 0 of each
// polls the queue in pinned memory, the block folds its interleaved share of each request, and
// the last block to finish replies. Flags are read with acquire and written with release at
// system scope (libcu++ atomic_ref), so that the data written before a flag is seen with it.
#include <cuda/atomic>

#include "runtime/gpu/element_ops.cuh"
#include "runtime/gpu/fold_server.hpp"

namespace flexplan::gpu {
namespace {

// Folds read pinned host memory over PCIe: a few blocks with many loads in flight saturate it.
constexpr int kServerThreads = 512;
constexpr int kMaxServerBlocks = 32;

using SystemFlag = cuda::atomic_ref<uint32_t, cuda::thread_scope_system>;
using DeviceCounter = cuda::atomic_ref<unsigned, cuda::thread_scope_device>;

template <typename T, typename A>
struct Plain {
  __device__ static T step(T a, T b, ReduceOp op) { return A::combine(a, b, op); }
};
template <typename H, float (*ToFloat)(H), H (*FromFloat)(float)>
struct Half {
  __device__ static H step(H a, H b, ReduceOp op) { return FromFloat(Arith<float>::combine(ToFloat(a), ToFloat(b), op)); }
};

// out[i] for i = first, first + stride, ...: the running result rounds to T after every step, as
// the host's left fold through `partial` does.
template <typename T, typename Step>
__device__ void fold_share(const FoldRequest& r, size_t first, size_t stride) {
  T* out = static_cast<T*>(r.out);
  for (size_t i = first; i < r.n; i += stride) {
    T acc = static_cast<const T*>(r.parts[0])[i];
    for (uint32_t k = 1; k < r.count; ++k) acc = Step::step(acc, static_cast<const T*>(r.parts[k])[i], r.op);
    out[i] = acc;
  }
}

template <typename T, typename Wide>
__device__ void divide_share(const FoldRequest& r, size_t first, size_t stride) {
  T* buf = static_cast<T*>(r.out);
  const Wide divisor = static_cast<Wide>(r.divisor);
  for (size_t i = first; i < r.n; i += stride) buf[i] = static_cast<T>(static_cast<Wide>(buf[i]) / divisor);
}

template <typename H, float (*ToFloat)(H), H (*FromFloat)(float)>
__device__ void divide_half_share(const FoldRequest& r, size_t first, size_t stride) {
  H* buf = static_cast<H*>(r.out);
  const float divisor = static_cast<float>(r.divisor);
  for (size_t i = first; i < r.n; i += stride) buf[i] = FromFloat(ToFloat(buf[i]) / divisor);
}

__device__ void serve(const FoldRequest& r, size_t first, size_t stride) {
  if (r.kind == FoldKind::Divide) {
    switch (r.type) {
      case DataType::Float32: return divide_share<float, float>(r, first, stride);
      case DataType::Float64: return divide_share<double, double>(r, first, stride);
      case DataType::Float16: return divide_half_share<__half, h2f, f2h>(r, first, stride);
      case DataType::BFloat16: return divide_half_share<__nv_bfloat16, b2f, f2b>(r, first, stride);
      case DataType::Int32: return divide_share<int32_t, int64_t>(r, first, stride);
      case DataType::Int64: return divide_share<int64_t, int64_t>(r, first, stride);
      case DataType::UInt8: return divide_share<uint8_t, uint64_t>(r, first, stride);
    }
    return;
  }
  switch (r.type) {
    case DataType::Float32: return fold_share<float, Plain<float, Arith<float>>>(r, first, stride);
    case DataType::Float64: return fold_share<double, Plain<double, Arith<double>>>(r, first, stride);
    case DataType::Float16: return fold_share<__half, Half<__half, h2f, f2h>>(r, first, stride);
    case DataType::BFloat16: return fold_share<__nv_bfloat16, Half<__nv_bfloat16, b2f, f2b>>(r, first, stride);
    case DataType::Int32: return fold_share<int32_t, Plain<int32_t, WrapArith<int32_t, uint32_t>>>(r, first, stride);
    case DataType::Int64: return fold_share<int64_t, Plain<int64_t, WrapArith<int64_t, uint64_t>>>(r, first, stride);
    case DataType::UInt8: return fold_share<uint8_t, Plain<uint8_t, WrapArith<uint8_t, uint8_t>>>(r, first, stride);
  }
}

__global__ void __launch_bounds__(kServerThreads) fold_server(FoldQueue* queue, unsigned* arrivals, uint32_t operation) {
  __shared__ FoldRequest request;
  __shared__ int serving;
  SystemFlag posted(queue->posted), stop(queue->stop), running(queue->running), finished(queue->finished);
  DeviceCounter met(*arrivals);
  uint32_t seen = 0;  // thread 0's: the last request this block took
  if (threadIdx.x == 0) {
    // Read before checking in: the host posts nothing until every block has checked in.
    seen = posted.load(cuda::memory_order_acquire);
    if (met.fetch_add(1, cuda::memory_order_acq_rel) == gridDim.x - 1) {
      met.store(0, cuda::memory_order_relaxed);
      running.store(operation, cuda::memory_order_release);
    }
  }
  const size_t first = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (;;) {
    if (threadIdx.x == 0) {
      int next = 0;
      for (;;) {
        const uint32_t p = posted.load(cuda::memory_order_acquire);
        if (p != seen) {
          seen = p;
          next = 1;
          break;
        }
        if (at_or_after(stop.load(cuda::memory_order_acquire), operation)) break;
        __nanosleep(256);
      }
      if (next) request = queue->request;
      serving = next;
    }
    __syncthreads();
    if (!serving) return;
    __threadfence_system();  // (the block's reads of host data follow thread 0's acquire)
    serve(request, first, stride);
    __threadfence_system();  // this thread's writes reach the host before the reply
    __syncthreads();
    if (threadIdx.x == 0 && met.fetch_add(1, cuda::memory_order_acq_rel) == gridDim.x - 1) {
      met.store(0, cuda::memory_order_relaxed);
      finished.store(seen, cuda::memory_order_release);
    }
    __syncthreads();  // `request` is rewritten by the next round
  }
}

}  // namespace

cudaError_t launch_fold_server(FoldQueue* queue, unsigned* arrivals, uint32_t operation, cudaStream_t stream) {
  int device = 0, sms = 1, cooperative = 0;
  cudaError_t result = cudaGetDevice(&device);
  if (result == cudaSuccess) result = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (result == cudaSuccess) result = cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device);
  if (result != cudaSuccess) return result;
  // Blocks wait for each other: a cooperative launch guarantees they are resident together.
  const dim3 grid(sms < kMaxServerBlocks ? sms : kMaxServerBlocks), block(kServerThreads);
  void* args[] = {&queue, &arrivals, &operation};
  if (cooperative) return cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(&fold_server), grid, block, args, 0, stream);
  fold_server<<<grid, block, 0, stream>>>(queue, arrivals, operation);
  return cudaGetLastError();
}

}  // namespace flexplan::gpu
