// UCX tag layout. A tag names one chunk of one hop: (sequence, step, op, chunk), high bits to
// low. Every chain has one sender per receiver per op, so on a given receiver the tag alone
// identifies the message, whichever peer sends it and however operations overlap.
//
//   63          48 47      36 35          20 19          0
//   [ sequence 16 ][ step 12 ][ op index 16 ][ chunk 20   ]
//
// Sequence numbers wrap at 2^16. With at most L = 2^15 operations outstanding per rank, no
// message can reach an outstanding operation of the same number modulo 2^16: if this rank's
// oldest incomplete operation is s, it has issued at most s + L - 1; a peer issues operation x
// only after completing x - L, which needs this rank to have issued x - L, so x <= s + 2L - 1
// < s + 2^16, and every older operation of this rank has consumed all its messages. Plans
// beyond 4096 steps or 65536 ops per step are refused at creation; ranges beyond 2^20 chunks
// get proportionally longer chunks.
#pragma once

#include <cstdint>

namespace flexplan::tag {

inline constexpr int kChunkBits = 20;
inline constexpr int kOpBits = 16;
inline constexpr int kStepBits = 12;
inline constexpr int kSequenceBits = 16;
static_assert(kChunkBits + kOpBits + kStepBits + kSequenceBits == 64);

inline constexpr uint64_t kMaxChunks = uint64_t{1} << kChunkBits;
inline constexpr uint64_t kMaxOps = uint64_t{1} << kOpBits;
inline constexpr uint64_t kMaxSteps = uint64_t{1} << kStepBits;
inline constexpr uint64_t kMaxOutstanding = uint64_t{1} << (kSequenceBits - 1);

inline constexpr uint64_t kFullMask = ~uint64_t{0};

inline uint64_t make(uint64_t sequence, uint64_t step, uint64_t op, uint64_t chunk) {
  constexpr uint64_t sequence_mask = (uint64_t{1} << kSequenceBits) - 1;
  return ((sequence & sequence_mask) << (kStepBits + kOpBits + kChunkBits)) |
         (step << (kOpBits + kChunkBits)) | (op << kChunkBits) | chunk;
}

}  // namespace flexplan::tag
