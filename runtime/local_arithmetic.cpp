// The CPU implementation of the runtime's local arithmetic (local_arithmetic.hpp).
#include "runtime/local_arithmetic.hpp"

#include <new>

#include "runtime/reduce_kernels.hpp"

namespace flexplan {
namespace {

class HostArithmetic final : public LocalArithmetic {
 public:
  std::string fold(std::byte* out, std::byte* partial, const std::byte* const* parts, size_t count, size_t n,
                   DataType type, ReduceOp op) override {
    fold_left(out, partial, parts, count, [&](std::byte* target, const std::byte* a, const std::byte* b) {
      kernels::combine(target, a, b, n, type, op);
    });
    return {};
  }
  std::string divide(std::byte* buf, size_t n, DataType type, uint64_t divisor) override {
    kernels::divide(buf, n, type, divisor);
    return {};
  }
  std::byte* allocate(size_t bytes) override { return new std::byte[bytes]; }
  void release(std::byte* data, size_t) override { delete[] data; }
  bool folds_in_parts() const override { return true; }
};

}  // namespace

LocalArithmetic& host_arithmetic() {
  static HostArithmetic arithmetic;
  return arithmetic;
}

}  // namespace flexplan
