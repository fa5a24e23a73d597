#include "bench/flexbench/check_pattern.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "runtime/half.hpp"

namespace flexplan::bench {
namespace {

constexpr size_t kPeriod = 14;

int64_t pattern(ReduceOp op, int rank, size_t index) {
  // Products stay at most 2^world: factors 1 and 2.
  if (op == ReduceOp::Prod) return 1 + static_cast<int64_t>((static_cast<size_t>(rank) + index) % 2);
  return static_cast<int64_t>((static_cast<size_t>(rank) + 3 * index) % 7);
}

void store(void* buffer, size_t i, DataType type, double value) {
  switch (type) {
    case DataType::Float32: static_cast<float*>(buffer)[i] = static_cast<float>(value); break;
    case DataType::Float64: static_cast<double*>(buffer)[i] = value; break;
    case DataType::Float16: static_cast<uint16_t*>(buffer)[i] = half::float_to_f16(static_cast<float>(value)); break;
    case DataType::BFloat16: static_cast<uint16_t*>(buffer)[i] = half::float_to_bf16(static_cast<float>(value)); break;
    case DataType::Int32: static_cast<int32_t*>(buffer)[i] = static_cast<int32_t>(value); break;
    case DataType::Int64: static_cast<int64_t*>(buffer)[i] = static_cast<int64_t>(value); break;
    case DataType::UInt8: static_cast<uint8_t*>(buffer)[i] = static_cast<uint8_t>(value); break;
  }
}

double load(const void* buffer, size_t i, DataType type) {
  switch (type) {
    case DataType::Float32: return static_cast<const float*>(buffer)[i];
    case DataType::Float64: return static_cast<const double*>(buffer)[i];
    case DataType::Float16: return half::f16_to_float(static_cast<const uint16_t*>(buffer)[i]);
    case DataType::BFloat16: return half::bf16_to_float(static_cast<const uint16_t*>(buffer)[i]);
    case DataType::Int32: return static_cast<const int32_t*>(buffer)[i];
    case DataType::Int64: return static_cast<double>(static_cast<const int64_t*>(buffer)[i]);
    case DataType::UInt8: return static_cast<const uint8_t*>(buffer)[i];
  }
  return 0;
}

bool is_float(DataType type) {
  return type == DataType::Float32 || type == DataType::Float64 || type == DataType::Float16 ||
         type == DataType::BFloat16;
}

double unit_roundoff(DataType type) {
  switch (type) {
    case DataType::Float64: return 0x1p-53;
    case DataType::Float32: return 0x1p-24;
    case DataType::Float16: return 0x1p-11;
    case DataType::BFloat16: return 0x1p-8;
    default: return 0;
  }
}

// The exact all-reduce of the patterns at an index with this residue, as the type holds it.
double expected(DataType type, ReduceOp op, int world, size_t residue) {
  int64_t acc = pattern(op, 0, residue);
  for (int r = 1; r < world; ++r) {
    const int64_t x = pattern(op, r, residue);
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg: acc += x; break;
      case ReduceOp::Prod: acc *= x; break;
      case ReduceOp::Min: acc = std::min(acc, x); break;
      case ReduceOp::Max: acc = std::max(acc, x); break;
    }
  }
  if (op == ReduceOp::Avg && is_float(type)) return static_cast<double>(acc) / world;
  if (op == ReduceOp::Avg) acc /= world;  // integer avg truncates
  if (type == DataType::UInt8) return static_cast<uint8_t>(acc);  // wraps as the type does
  if (type == DataType::Int32) return static_cast<int32_t>(acc);
  return static_cast<double>(acc);
}

}  // namespace

void fill_pattern(void* buffer, size_t count, DataType type, ReduceOp op, int rank) {
  for (size_t i = 0; i < count; ++i) store(buffer, i, type, static_cast<double>(pattern(op, rank, i)));
}

uint64_t count_wrong(const void* result, size_t count, DataType type, ReduceOp op, int world) {
  std::array<double, kPeriod> want{};
  for (size_t residue = 0; residue < kPeriod; ++residue) want[residue] = expected(type, op, world, residue);
  // Integer-valued results are exact in every type; avg's quotient rounds once.
  const double relative = op == ReduceOp::Avg ? unit_roundoff(type) : 0;
  uint64_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    const double w = want[i % kPeriod];
    if (!(std::fabs(load(result, i, type) - w) <= relative * std::fabs(w))) ++wrong;
  }
  return wrong;
}

}  // namespace flexplan::bench
