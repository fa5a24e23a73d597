#include "planner/ring_steps.hpp"

#include <stdexcept>

#include <fmt/core.h>

namespace flexplan {
namespace {

// The common ring size, after checking every ring can be chunked exactly.
size_t checked_ring_size(std::span<const RingSpec> rings) {
  if (rings.empty()) return 0;
  const size_t d = rings.front().members.size();
  for (const auto& ring : rings) {
    if (ring.members.size() != d)
      throw std::logic_error(fmt::format("parallel rings of different sizes ({} and {})", d,
                                         ring.members.size()));
    if (d == 0 || ring.end < ring.begin || (ring.end - ring.begin) % d != 0)
      throw std::logic_error(fmt::format("ring range [{}, {}) does not split into {} chunks",
                                         ring.begin, ring.end, d));
  }
  return d;
}

ir::Op chunk_op(ir::OpKind kind, const RingSpec& ring, size_t chunk, int32_t root,
                int32_t sender, int32_t receiver) {
  const uint64_t size = (ring.end - ring.begin) / ring.members.size();
  ir::Op op;
  op.kind = kind;
  op.begin = ring.begin + chunk * size;
  op.end = op.begin + size;
  op.root = root;
  op.group = {sender, receiver};
  return op;
}

}  // namespace

// Step s: member i sends chunk (i - s - 1) mod d to member i+1, which adds its own. Chunk c
// starts at member c+1 and, after d-1 steps, has visited everyone and rests at member c.
void append_ring_reduce_scatter(std::vector<ir::Step>& steps, std::span<const RingSpec> rings,
                                int32_t level) {
  const size_t d = checked_ring_size(rings);
  for (size_t s = 0; s + 1 < d; ++s) {
    ir::Step step{ir::Phase::ReduceScatter, level, {}};
    step.ops.reserve(rings.size() * d);
    for (const auto& ring : rings) {
      for (size_t i = 0; i < d; ++i) {
        const int32_t sender = ring.members[i];
        const int32_t receiver = ring.members[(i + 1) % d];
        const size_t chunk = (i + 2 * d - s - 1) % d;
        step.ops.push_back(chunk_op(ir::OpKind::Reduce, ring, chunk, receiver, sender, receiver));
      }
    }
    steps.push_back(std::move(step));
  }
}

// Step s: member i passes chunk (i - s) mod d, the one it owns (s = 0) or just received, on.
void append_ring_all_gather(std::vector<ir::Step>& steps, std::span<const RingSpec> rings,
                            int32_t level) {
  const size_t d = checked_ring_size(rings);
  for (size_t s = 0; s + 1 < d; ++s) {
    ir::Step step{ir::Phase::AllGather, level, {}};
    step.ops.reserve(rings.size() * d);
    for (const auto& ring : rings) {
      for (size_t i = 0; i < d; ++i) {
        const int32_t sender = ring.members[i];
        const int32_t receiver = ring.members[(i + 1) % d];
        const size_t chunk = (i + d - s) % d;
        step.ops.push_back(
            chunk_op(ir::OpKind::Broadcast, ring, chunk, sender, sender, receiver));
      }
    }
    steps.push_back(std::move(step));
  }
}

}  // namespace flexplan
