// Recycled scratch buffers for chunk slots and staged ranges, so that steady-state operations do
// not allocate. The memory comes from the communicator's LocalArithmetic (heap memory on the
// host path, pinned memory the GPU can reach on the staged device path). Not thread-safe: a
// communicator is driven from one thread.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "runtime/local_arithmetic.hpp"

namespace flexplan {

// Gives a scratch buffer back to the arithmetic that allocated it.
struct ScratchRelease {
  LocalArithmetic* arithmetic = nullptr;
  size_t bytes = 0;
  void operator()(std::byte* data) const { arithmetic->release(data, bytes); }
};

struct ScratchBuffer {
  std::unique_ptr<std::byte[], ScratchRelease> data;
  size_t capacity = 0;
  std::byte* get() const { return data.get(); }
  explicit operator bool() const { return data != nullptr; }
};

class ScratchPool {
 public:
  using Buffer = ScratchBuffer;

  explicit ScratchPool(LocalArithmetic& arithmetic = host_arithmetic()) : arithmetic_(&arithmetic) {}

  // A buffer of at least `bytes` bytes (contents unspecified).
  Buffer acquire(size_t bytes);
  void release(Buffer buffer);
  LocalArithmetic& arithmetic() const { return *arithmetic_; }

 private:
  LocalArithmetic* arithmetic_;
  std::vector<Buffer> free_;
  size_t free_bytes_ = 0;
};

}  // namespace flexplan
