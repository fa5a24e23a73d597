// The host stand-in for the device kernels (device_kernels.hpp): each call enqueues a host
// function on the stream, so it runs in stream order like the kernel would. Linked with the
// emulation, whose "device" memory is host memory.
#include <cstring>
#include <limits>

#include "runtime/gpu/device_kernels.hpp"
#include "runtime/half.hpp"
#include "runtime/reduce_kernels.hpp"

namespace flexplan::gpu {
namespace {

struct Work {
  enum Kind { Fill, Divide, Combine } kind;
  void* dst;
  const void* a;
  const void* b;
  size_t n;
  DataType type;
  ReduceOp op;
  uint64_t divisor;
};

template <typename T>
void fill_typed(void* dst, size_t n, T value) {
  T* out = static_cast<T*>(dst);
  for (size_t i = 0; i < n; ++i) out[i] = value;
}

template <typename T>
T identity_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::Prod: return T(1);
    case ReduceOp::Min:
      return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max();
    case ReduceOp::Max:
      return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
    default: return T(0);
  }
}

void fill_now(void* dst, size_t n, DataType type, ReduceOp op) {
  switch (type) {
    case DataType::Float32: return fill_typed(dst, n, identity_of<float>(op));
    case DataType::Float64: return fill_typed(dst, n, identity_of<double>(op));
    case DataType::Float16: return fill_typed(dst, n, half::float_to_f16(identity_of<float>(op)));
    case DataType::BFloat16: return fill_typed(dst, n, half::float_to_bf16(identity_of<float>(op)));
    case DataType::Int32: return fill_typed(dst, n, identity_of<int32_t>(op));
    case DataType::Int64: return fill_typed(dst, n, identity_of<int64_t>(op));
    case DataType::UInt8: return fill_typed(dst, n, identity_of<uint8_t>(op));
  }
}

void run(void* data) {
  Work* work = static_cast<Work*>(data);
  switch (work->kind) {
    case Work::Fill: fill_now(work->dst, work->n, work->type, work->op); break;
    case Work::Divide: kernels::divide(work->dst, work->n, work->type, work->divisor); break;
    case Work::Combine: kernels::combine(work->dst, work->a, work->b, work->n, work->type, work->op); break;
  }
  delete work;
}

void enqueue(Work work, cudaStream_t stream) {
  if (work.n == 0) return;
  auto* heap = new Work(work);
  if (cudaLaunchHostFunc(stream, run, heap) != cudaSuccess) delete heap;
}

}  // namespace

void fill_identity(void* dst, size_t n, DataType type, ReduceOp op, cudaStream_t stream) {
  enqueue({Work::Fill, dst, nullptr, nullptr, n, type, op, 0}, stream);
}
void divide(void* buf, size_t n, DataType type, uint64_t divisor, cudaStream_t stream) {
  enqueue({Work::Divide, buf, nullptr, nullptr, n, type, ReduceOp::Sum, divisor}, stream);
}
void combine(void* dst, const void* a, const void* b, size_t n, DataType type, ReduceOp op,
             cudaStream_t stream) {
  enqueue({Work::Combine, dst, a, b, n, type, op, 0}, stream);
}
bool kernels_on_device() { return false; }

}  // namespace flexplan::gpu
