// The runtime's local arithmetic in CUDA kernels on pinned memory (device_arithmetic.hpp).
#include "runtime/gpu/device_arithmetic.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <new>

#include <fmt/format.h>

#include "runtime/gpu/device_api.hpp"
#include "runtime/gpu/device_kernels.hpp"

namespace flexplan::gpu {
namespace {
constexpr size_t kAlignment = 256;
constexpr size_t kMinGrowth = size_t{16} << 20;
}  // namespace

DeviceArithmetic::DeviceArithmetic(size_t arena_bytes) {
  check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  try {
    add_arena(std::max(arena_bytes, kAlignment));
    load_kernels();
  } catch (...) {
    for (const auto& [data, bytes] : arenas_) cudaFreeHost(data);
    cudaStreamDestroy(stream_);
    throw;
  }
}

void DeviceArithmetic::load_kernels() {
  // CUDA loads a kernel at its first launch (lazy loading, CUDA 12's default), and loading may
  // wait for the whole device: inside an operation, while the staged path's stream waits for
  // the operation, that is a deadlock (seen on an H100). So every kernel the arithmetic uses is
  // launched once here, on one element of the arena.
  std::byte* one = arenas_.front().first;
  for (DataType type : kAllDataTypes) {
    std::memset(one, 0, size_of(type));
    combine(one, one, one, 1, type, ReduceOp::Sum, stream_);
    gpu::divide(one, 1, type, 1, stream_);
  }
  check_cuda(cudaStreamSynchronize(stream_), "loading the staged path's kernels");
  check_cuda(cudaGetLastError(), "loading the staged path's kernels");
}

DeviceArithmetic::~DeviceArithmetic() {
  cudaStreamSynchronize(stream_);
  cudaStreamDestroy(stream_);
  for (const auto& [data, bytes] : arenas_) cudaFreeHost(data);
}

void DeviceArithmetic::add_arena(size_t bytes) {
  void* data = nullptr;
  check_cuda(cudaMallocHost(&data, bytes), "cudaMallocHost (staged scratch arena)");
  arenas_.emplace_back(static_cast<std::byte*>(data), bytes);
  arena_total_ += bytes;
  used_ = 0;
}

size_t DeviceArithmetic::size_class(size_t bytes) { return std::bit_ceil(std::max(bytes, kAlignment)); }

std::byte* DeviceArithmetic::allocate(size_t bytes) {
  const size_t size = size_class(bytes);
  {
    std::lock_guard lock(mutex_);
    auto it = free_.find(size);
    if (it != free_.end() && !it->second.empty()) {
      std::byte* data = it->second.back();
      it->second.pop_back();
      return data;
    }
    if (!arenas_.empty() && arenas_.back().second - used_ >= size) {
      std::byte* data = arenas_.back().first + used_;
      used_ += size;
      return data;
    }
    if (arena_total_ < kMaxArenaBytes) shortfall_ += size;  // (at the cap, the heap it stays)
  }
  return new std::byte[bytes];
}

bool DeviceArithmetic::in_arena(const std::byte* data) const {
  for (const auto& [base, length] : arenas_)
    if (data >= base && data < base + length) return true;
  return false;
}

void DeviceArithmetic::release(std::byte* data, size_t bytes) {
  std::lock_guard lock(mutex_);
  if (in_arena(data)) {
    free_[size_class(bytes)].push_back(data);
  } else {
    delete[] data;
  }
}

bool DeviceArithmetic::reusable(const std::byte* data) const {
  std::lock_guard lock(mutex_);
  return in_arena(data);
}

void DeviceArithmetic::set_staging(const void* data, size_t bytes) {
  std::lock_guard lock(mutex_);
  staging_ = {reinterpret_cast<uintptr_t>(data), data ? bytes : 0};
}

bool DeviceArithmetic::short_of_memory() const {
  std::lock_guard lock(mutex_);
  return shortfall_ > 0;
}

void DeviceArithmetic::grow() {
  std::lock_guard lock(mutex_);
  if (shortfall_ == 0) return;
  // Twice what ran short: the pool's buffers of one operation come back in other sizes too.
  const size_t bytes = std::min(std::max(kMinGrowth, 2 * shortfall_), kMaxArenaBytes - std::min(arena_total_, kMaxArenaBytes));
  shortfall_ = 0;
  if (bytes >= kAlignment) add_arena(bytes);
}

bool DeviceArithmetic::reachable(const void* data, size_t bytes) const {
  const auto p = reinterpret_cast<uintptr_t>(data);
  const auto within = [&](uintptr_t base, size_t length) { return p >= base && p - base <= length && bytes <= length - (p - base); };
  if (within(staging_.first, staging_.second)) return true;
  for (const auto& [base, length] : arenas_)
    if (within(reinterpret_cast<uintptr_t>(base), length)) return true;
  return false;
}

DeviceArithmetic::Counters DeviceArithmetic::counters() const {
  Counters c;
  c.device_folds = device_folds_;
  c.host_folds = host_folds_;
  c.device_divides = device_divides_;
  c.host_divides = host_divides_;
  std::lock_guard lock(mutex_);
  c.arena_bytes = arena_total_;
  return c;
}

std::string DeviceArithmetic::wait_for_kernels(const char* what) {
  cudaError_t result = cudaStreamSynchronize(stream_);
  if (result == cudaSuccess) result = cudaGetLastError();
  return result == cudaSuccess ? std::string() : fmt::format("{}: {}", what, cudaGetErrorString(result));
}

std::string DeviceArithmetic::fold(std::byte* out, std::byte* partial, const std::byte* const* parts, size_t count,
                                   size_t n, DataType type, ReduceOp op) {
  const size_t bytes = n * size_of(type);
  bool on_device;
  {
    std::lock_guard lock(mutex_);
    on_device = reachable(out, bytes) && reachable(partial, bytes);
    for (size_t k = 0; k < count && on_device; ++k) on_device = reachable(parts[k], bytes);
  }
  if (!on_device) {
    ++host_folds_;
    return host_arithmetic().fold(out, partial, parts, count, n, type, op);
  }
  fold_left(out, partial, parts, count, [&](std::byte* target, const std::byte* a, const std::byte* b) {
    combine(target, a, b, n, type, op, stream_);
  });
  std::string why = wait_for_kernels("combine kernel");
  if (why.empty()) ++device_folds_;
  return why;
}

std::string DeviceArithmetic::divide(std::byte* buf, size_t n, DataType type, uint64_t divisor) {
  bool on_device;
  {
    std::lock_guard lock(mutex_);
    on_device = reachable(buf, n * size_of(type));
  }
  if (!on_device) {
    ++host_divides_;
    return host_arithmetic().divide(buf, n, type, divisor);
  }
  gpu::divide(buf, n, type, divisor, stream_);
  std::string why = wait_for_kernels("divide kernel");
  if (why.empty()) ++device_divides_;
  return why;
}

}  // namespace flexplan::gpu
