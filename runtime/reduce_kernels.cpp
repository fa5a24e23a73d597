#include "runtime/reduce_kernels.hpp"

#include <algorithm>
#include <type_traits>

#include "runtime/half.hpp"

namespace flexplan::kernels {
namespace {

// Integers add and multiply in their unsigned twin so that overflow wraps instead of being UB.
template <typename T>
T add(T x, T y) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(x) + static_cast<U>(y)));
  } else {
    return x + y;
  }
}

template <typename T>
T mul(T x, T y) {
  if constexpr (std::is_integral_v<T>) {
    // uint8 promotes to int, where 255 * 255 still fits; wider types stay unsigned.
    using U = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
    return static_cast<T>(static_cast<U>(x) * static_cast<U>(y));
  } else {
    return x * y;
  }
}

// The loops say their pointers do not overlap (restrict), so that the compiler keeps a vector of
// elements per instruction without checking at run time; this file is built with -O3, since
// GCC 12 leaves these loops scalar at -O2 (one float a cycle: the reduce hop cost more than the
// copy that brought its data, docs/flexbench.md). Element by element the results are the same.
template <typename T, typename F>
void apply_apart(T* __restrict d, const T* __restrict x, const T* __restrict y, size_t n, F f) {
  for (size_t i = 0; i < n; ++i) d[i] = f(x[i], y[i]);
}
// d[i] = f(d[i], y[i]), or with `d_second`, f(y[i], d[i]): the output is one of the inputs.
template <typename T, bool d_second, typename F>
void apply_into(T* __restrict d, const T* __restrict y, size_t n, F f) {
  for (size_t i = 0; i < n; ++i) d[i] = d_second ? f(y[i], d[i]) : f(d[i], y[i]);
}

// dst is a, or b, or overlaps neither (combine's contract).
template <typename T, typename F>
void apply(void* dst, const void* a, const void* b, size_t n, F f) {
  T* d = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  if (d == x && d == y) {
    for (size_t i = 0; i < n; ++i) d[i] = f(d[i], d[i]);
  } else if (d == x) {
    apply_into<T, false>(d, y, n, f);
  } else if (d == y) {
    apply_into<T, true>(d, x, n, f);
  } else {
    apply_apart<T>(d, x, y, n, f);
  }
}

template <typename T>
void combine_native(void* dst, const void* a, const void* b, size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return apply<T>(dst, a, b, n, add<T>);
    case ReduceOp::Prod: return apply<T>(dst, a, b, n, mul<T>);
    case ReduceOp::Min: return apply<T>(dst, a, b, n, [](T x, T y) { return std::min(x, y); });
    case ReduceOp::Max: return apply<T>(dst, a, b, n, [](T x, T y) { return std::max(x, y); });
  }
}

// 16-bit floats: widen, combine in float, round back once per element.
template <float (*Widen)(uint16_t), uint16_t (*Narrow)(float)>
void combine_16(void* dst, const void* a, const void* b, size_t n, ReduceOp op) {
  auto through_float = [](auto f) {
    return [f](uint16_t x, uint16_t y) { return Narrow(f(Widen(x), Widen(y))); };
  };
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      return apply<uint16_t>(dst, a, b, n, through_float([](float x, float y) { return x + y; }));
    case ReduceOp::Prod:
      return apply<uint16_t>(dst, a, b, n, through_float([](float x, float y) { return x * y; }));
    case ReduceOp::Min:
      return apply<uint16_t>(dst, a, b, n, through_float([](float x, float y) { return std::min(x, y); }));
    case ReduceOp::Max:
      return apply<uint16_t>(dst, a, b, n, through_float([](float x, float y) { return std::max(x, y); }));
  }
}

template <typename T>
void divide_native(void* buf, size_t n, uint64_t divisor) {
  T* d = static_cast<T*>(buf);
  // Divide in a 64-bit type so that a world size above the element type's range stays exact.
  using Wide = std::conditional_t<std::is_floating_point_v<T>, T,
                                  std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>;
  const Wide by = static_cast<Wide>(divisor);
  for (size_t i = 0; i < n; ++i) d[i] = static_cast<T>(static_cast<Wide>(d[i]) / by);
}

template <float (*Widen)(uint16_t), uint16_t (*Narrow)(float)>
void divide_16(void* buf, size_t n, uint64_t divisor) {
  auto* d = static_cast<uint16_t*>(buf);
  const float by = static_cast<float>(divisor);
  for (size_t i = 0; i < n; ++i) d[i] = Narrow(Widen(d[i]) / by);
}

}  // namespace

void combine(void* dst, const void* a, const void* b, size_t n, DataType type, ReduceOp op) {
  switch (type) {
    case DataType::Float32: return combine_native<float>(dst, a, b, n, op);
    case DataType::Float64: return combine_native<double>(dst, a, b, n, op);
    case DataType::Int32: return combine_native<int32_t>(dst, a, b, n, op);
    case DataType::Int64: return combine_native<int64_t>(dst, a, b, n, op);
    case DataType::UInt8: return combine_native<uint8_t>(dst, a, b, n, op);
    case DataType::Float16:
      return combine_16<half::f16_to_float, half::float_to_f16>(dst, a, b, n, op);
    case DataType::BFloat16:
      return combine_16<half::bf16_to_float, half::float_to_bf16>(dst, a, b, n, op);
  }
}

void divide(void* buf, size_t n, DataType type, uint64_t divisor) {
  switch (type) {
    case DataType::Float32: return divide_native<float>(buf, n, divisor);
    case DataType::Float64: return divide_native<double>(buf, n, divisor);
    case DataType::Int32: return divide_native<int32_t>(buf, n, divisor);
    case DataType::Int64: return divide_native<int64_t>(buf, n, divisor);
    case DataType::UInt8: return divide_native<uint8_t>(buf, n, divisor);
    case DataType::Float16: return divide_16<half::f16_to_float, half::float_to_f16>(buf, n, divisor);
    case DataType::BFloat16: return divide_16<half::bf16_to_float, half::float_to_bf16>(buf, n, divisor);
  }
}

}  // namespace flexplan::kernels
