// How a range is cut into pipeline chunks along a chain. One function, used by the runtime to
// move data and by the planner's cost model to price pipeline fill, so both agree.
#pragma once

#include <algorithm>
#include <cstdint>

namespace flexplan::codegen {

// The runtime's default chunk (runtime Options::chunk_bytes, FLEXPLAN_CHUNK_BYTES).
inline constexpr uint64_t kDefaultChunkBytes = uint64_t{1} << 20;
// Chunks per range the runtime's tags can number (the tag's chunk field). A star reduce's root
// tells its sources apart by the high bits of that field, which leaves each of its hops fewer
// (codegen::Task::max_chunks, a power of two).
inline constexpr uint64_t kMaxChunksPerRange = uint64_t{1} << 20;

struct Chunking {
  uint64_t chunk_elements = 0;  // elements per chunk; the last one may be shorter
  uint64_t chunks = 0;
};

// Chunks of `chunk_bytes` (at least one element) while the range fits in `max_chunks` of them;
// beyond, the chunks grow so that it does. Every chunk but the last has the same size, so a
// chunk never exceeds max(chunk_bytes, range / max_chunks).
inline Chunking chunk_range(uint64_t elements, uint64_t element_size, uint64_t chunk_bytes,
                            uint64_t max_chunks = kMaxChunksPerRange) {
  if (elements == 0) return {1, 0};
  const uint64_t preferred = std::max<uint64_t>(1, chunk_bytes / std::max<uint64_t>(element_size, 1));
  max_chunks = std::max<uint64_t>(max_chunks, 1);
  const uint64_t least = (elements + max_chunks - 1) / max_chunks;
  const uint64_t per_chunk = std::max(preferred, least);
  return {per_chunk, (elements + per_chunk - 1) / per_chunk};
}

}  // namespace flexplan::codegen
