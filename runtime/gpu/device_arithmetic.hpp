// flexplan::gpu::DeviceArithmetic: the host runtime's local arithmetic (runtime/local_arithmetic.hpp)
// in CUDA kernels, for the staged UCX path (staged_communicator.hpp). Received chunks land in
// pinned host memory that the GPU reads and writes directly (mapped, unified addressing); each
// fold launches its combine kernels on a private stream and waits for them, so the runtime sees
// the result as the host kernels would give it. Scratch comes from pinned arenas allocated only
// at safe points (construction, grow()): allocating or freeing pinned memory may wait for the
// whole device, which must never happen while the staged path holds a stream for the runtime.
// Scratch the arenas cannot serve is heap memory, folded on the host and counted, and grow()
// adds an arena that covers it for the next operations. Every kernel is launched once at
// construction: CUDA's lazy loading may otherwise wait for the whole device at a first launch.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "runtime/local_arithmetic.hpp"

namespace flexplan::gpu {

class DeviceArithmetic final : public LocalArithmetic {
 public:
  // With `arena_bytes` of pinned memory ready. Throws RuntimeError if CUDA refuses.
  explicit DeviceArithmetic(size_t arena_bytes);
  ~DeviceArithmetic() override;
  DeviceArithmetic(const DeviceArithmetic&) = delete;
  DeviceArithmetic& operator=(const DeviceArithmetic&) = delete;

  std::string fold(std::byte* out, std::byte* partial, const std::byte* const* parts, size_t count, size_t n,
                   DataType type, ReduceOp op) override;
  std::string divide(std::byte* buf, size_t n, DataType type, uint64_t divisor) override;
  std::byte* allocate(size_t bytes) override;
  void release(std::byte* data, size_t bytes) override;
  // Heap scratch (beyond the arenas) is not kept for reuse: freed, so that the next allocation
  // of its size comes from an arena once grow() added one.
  bool reusable(const std::byte* data) const override;

  // Pinned memory outside the arenas the kernels may also touch (the staging buffer), replacing
  // the previous one; null to forget it.
  void set_staging(const void* data, size_t bytes);
  // Whether scratch ran short of the arenas since the last grow().
  bool short_of_memory() const;
  // Adds an arena for what ran short, up to kMaxArenaBytes in all (beyond, scratch stays on the
  // heap, folded on the host). Only where nothing of this process waits for the runtime.
  void grow();
  static constexpr size_t kMaxArenaBytes = size_t{1} << 30;

  struct Counters {
    uint64_t device_folds = 0, host_folds = 0;    // by CUDA kernels; on the host: scratch outside pinned memory
    uint64_t device_divides = 0, host_divides = 0;
    size_t arena_bytes = 0;                        // pinned scratch in all arenas
  };
  Counters counters() const;

 private:
  // Whether [data, data + bytes) lies in an arena or the staging buffer.
  bool reachable(const void* data, size_t bytes) const;
  bool in_arena(const std::byte* data) const;
  static size_t size_class(size_t bytes);
  void add_arena(size_t bytes);
  void load_kernels();  // launches each kernel once (see the .cpp)
  // Waits for the kernels enqueued on stream_; "" or "<what>: <CUDA error>".
  std::string wait_for_kernels(const char* what);

  cudaStream_t stream_ = nullptr;
  mutable std::mutex mutex_;  // the arenas and free lists (allocate/release vs. grow)
  std::vector<std::pair<std::byte*, size_t>> arenas_;  // pinned blocks
  size_t used_ = 0;                                    // bump offset in the newest arena
  size_t arena_total_ = 0;                             // bytes in all arenas
  std::map<size_t, std::vector<std::byte*>> free_;     // arena pieces by size class
  size_t shortfall_ = 0;                               // bytes served from the heap since grow()
  std::pair<uintptr_t, size_t> staging_{0, 0};
  std::atomic<uint64_t> device_folds_{0}, host_folds_{0}, device_divides_{0}, host_divides_{0};
};

}  // namespace flexplan::gpu
