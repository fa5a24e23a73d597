// flexbench's input patterns and the checks of each collective's result (check_pattern.hpp).
#include "bench/flexbench/check_pattern.hpp"

#include <algorithm>
#include <array>
#include <cmath>

namespace flexplan::bench {
namespace {

constexpr size_t kPeriod = 14;

int64_t pattern(ReduceOp op, int rank, size_t index) {
  // Products stay at most 2^world: factors 1 and 2.
  if (op == ReduceOp::Prod) return 1 + static_cast<int64_t>((static_cast<size_t>(rank) + index) % 2);
  return static_cast<int64_t>((static_cast<size_t>(rank) + 3 * index) % 7);
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
  if (op == ReduceOp::Avg && is_floating(type)) return static_cast<double>(acc) / world;
  if (op == ReduceOp::Avg) acc /= world;  // integer avg truncates
  if (type == DataType::UInt8) return static_cast<uint8_t>(acc);  // wraps as the type does
  if (type == DataType::Int32) return static_cast<int32_t>(acc);
  return static_cast<double>(acc);
}

}  // namespace

void fill_pattern(void* buffer, size_t count, DataType type, ReduceOp op, int rank) {
  for (size_t i = 0; i < count; ++i) store_element(buffer, i, type, static_cast<double>(pattern(op, rank, i)));
}

uint64_t count_wrong(const void* result, size_t count, DataType type, ReduceOp op, int world, size_t first) {
  std::array<double, kPeriod> want{};
  for (size_t residue = 0; residue < kPeriod; ++residue) want[residue] = expected(type, op, world, residue);
  // Integer-valued results are exact in every type; avg's quotient rounds once.
  const double relative = op == ReduceOp::Avg ? unit_roundoff(type) : 0;
  uint64_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    const double w = want[(first + i) % kPeriod];
    if (!(std::fabs(load_element(result, i, type) - w) <= relative * std::fabs(w))) ++wrong;
  }
  return wrong;
}

}  // namespace flexplan::bench

namespace flexplan::bench {

uint64_t count_wrong_copy(const void* result, size_t count, DataType type, ReduceOp op, int rank) {
  std::array<double, kPeriod> want{};
  for (size_t residue = 0; residue < kPeriod; ++residue) {
    double one[1];
    store_element(one, 0, type, static_cast<double>(pattern(op, rank, residue)));
    want[residue] = load_element(one, 0, type);
  }
  uint64_t wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += load_element(result, i, type) != want[i % kPeriod];
  return wrong;
}

CallShape call_shape(ir::Collective collective, uint64_t size, size_t element, int world) {
  CallShape shape;
  if (ir::has_shards(collective)) {
    shape.per_rank = std::max<uint64_t>(1, size / element / static_cast<uint64_t>(world));
    shape.count = shape.per_rank * static_cast<uint64_t>(world);
  } else {
    shape.count = std::max<uint64_t>(1, size / element);
  }
  return shape;
}

uint64_t count_wrong_result(ir::Collective collective, int root, const void* result, CallShape shape, DataType type,
                            ReduceOp op, int rank, int world) {
  const auto* bytes = static_cast<const std::byte*>(result);
  switch (collective) {
    case ir::Collective::AllReduce: return count_wrong(result, shape.count, type, op, world);
    case ir::Collective::ReduceScatter:
      return count_wrong(result, shape.per_rank, type, op, world, shape.per_rank * static_cast<uint64_t>(rank));
    case ir::Collective::AllGather: {
      uint64_t wrong = 0;
      for (int r = 0; r < world; ++r)
        wrong += count_wrong_copy(bytes + shape.per_rank * static_cast<uint64_t>(r) * size_of(type), shape.per_rank,
                                  type, op, r);
      return wrong;
    }
    case ir::Collective::Broadcast: return count_wrong_copy(result, shape.count, type, op, root);
    case ir::Collective::Reduce: return rank == root ? count_wrong(result, shape.count, type, op, world) : 0;
  }
  return 0;
}

}  // namespace flexplan::bench
