// How a range is cut into pipeline chunks along a chain. One function, used by the runtime to
// move data and by the planner's cost model to price pipeline fill, so both agree.
#pragma once

#include <algorithm>
#include <cstdint>

namespace flexplan::codegen {

// The runtime's default chunk (runtime Options::chunk_bytes, FLEXPLAN_CHUNK_BYTES).
inline constexpr uint64_t kDefaultChunkBytes = uint64_t{1} << 20;
// Chunks per range the runtime's tags can number (the tag's chunk field).
inline constexpr uint64_t kMaxChunksPerRange = uint64_t{1} << 20;

struct Chunking {
  uint64_t chunk_elements = 0;  // elements per chunk; the last one may be shorter
  uint64_t chunks = 0;
};

// Chunks of `chunk_bytes` (at least one element) while the range fits in
// kMaxChunksPerRange of them; beyond, the chunks grow so that it does. Every chunk but the
// last has the same size, so a chunk never exceeds max(chunk_bytes, range / 2^20).
inline Chunking chunk_range(uint64_t elements, uint64_t element_size, uint64_t chunk_bytes) {
  if (elements == 0) return {1, 0};
  const uint64_t preferred = std::max<uint64_t>(1, chunk_bytes / std::max<uint64_t>(element_size, 1));
  const uint64_t least = (elements + kMaxChunksPerRange - 1) / kMaxChunksPerRange;
  const uint64_t per_chunk = std::max(preferred, least);
  return {per_chunk, (elements + per_chunk - 1) / per_chunk};
}

}  // namespace flexplan::codegen
