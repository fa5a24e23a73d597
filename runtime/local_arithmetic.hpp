// The seam between the runtime and where a rank's local arithmetic runs: folding received chunks
// with its own data, avg's final division, and the scratch memory those chunks land in. The
// host runtime uses host_arithmetic() (the CPU kernels of reduce_kernels.hpp); the staged GPU
// path (runtime/gpu/device_arithmetic.hpp) runs the same arithmetic in CUDA kernels on pinned
// host memory. Every call comes from the thread that drives the communicator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/datatype.hpp"

namespace flexplan {

class LocalArithmetic {
 public:
  virtual ~LocalArithmetic() = default;

  // out = parts[0] op parts[1] op ... op parts[count-1], left to right, n elements each
  // (count >= 2). The running result goes to `partial` (which may be parts[0] or parts[1], read
  // before it is written); only the last combine writes `out`, which may be one of the parts. Avg folds as sum. Returns "" or why it
  // failed.
  virtual std::string fold(std::byte* out, std::byte* partial, const std::byte* const* parts, size_t count,
                           size_t n, DataType type, ReduceOp op) = 0;
  // buf[i] /= divisor, as kernels::divide. Returns "" or why it failed.
  virtual std::string divide(std::byte* buf, size_t n, DataType type, uint64_t divisor) = 0;
  // Scratch the arithmetic can read and write (received chunks, staged ranges); never null
  // (throws std::bad_alloc). release() gets back exactly what allocate() gave, with its size.
  virtual std::byte* allocate(size_t bytes) = 0;
  virtual void release(std::byte* data, size_t bytes) = 0;
  // Whether a released buffer may be kept for reuse (ScratchPool); false makes the pool free it.
  virtual bool reusable(const std::byte*) const { return true; }
  // Whether a reduce hop whose contributions come by single copy may fold them in parts (of
  // Options::fused_read_bytes), each read into a small buffer and added while it is still in
  // cache, instead of reading each chunk whole into scratch first (operation.hpp). False: whole
  // chunks, one fold per chunk, as a device's kernels want.
  virtual bool folds_in_parts() const { return false; }
};

// The CPU arithmetic, with ordinary heap scratch; shared, stateless.
LocalArithmetic& host_arithmetic();

// fold()'s order, shared by its implementations: combine(target, a, b) for each step, the running
// result in `partial`, the last step into `out`.
template <typename Combine>
void fold_left(std::byte* out, std::byte* partial, const std::byte* const* parts, size_t count, Combine&& combine) {
  const std::byte* sum = parts[0];
  for (size_t k = 1; k < count; ++k) {
    std::byte* target = k + 1 == count ? out : partial;
    combine(target, sum, parts[k]);
    sum = target;
  }
}

}  // namespace flexplan
