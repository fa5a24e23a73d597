// UCX tag layout. A tag names one chunk of one hop on its receiver: (sequence, receive index,
// chunk), high bits to low. The receive index numbers the receiver's receives within the
// schedule, in (step, op) order: both ends compute it from the schedule (rank_program.hpp), and
// since every op's chain has one sender per receiver, on a given receiver the tag alone names
// the message, whichever peer sends it and however operations overlap.
//
//   63        52 51                          20 19          0
//   [ seq 12    ][ receive index 32           ][ chunk 20   ]
//
// Sequence numbers wrap at 2^12. An operation is issued only while it is less than
// kMaxAhead = 2^11 numbers ahead of the oldest unfinished one on its rank, and every
// operation, even of zero elements, completes only after every rank issued it. So if this
// rank's oldest unfinished operation is s, it has issued at most s + L - 1 (L = kMaxAhead); a
// peer issues x only after completing x - L, which needs this rank to have issued x - L, so
// x <= s + 2L - 1 < s + 2^12: no message of a later operation carries the number of an
// unfinished one modulo 2^12, and every earlier operation of this rank has consumed all its
// messages. docs/runtime.md, Deterministic matching, says the same.
#pragma once

#include <cstdint>

#include "codegen/chunking.hpp"

namespace flexplan::tag {

inline constexpr int kChunkBits = 20;
inline constexpr int kReceiveBits = 32;
inline constexpr int kSequenceBits = 12;
static_assert(kChunkBits + kReceiveBits + kSequenceBits == 64);
static_assert(codegen::kMaxChunksPerRange == uint64_t{1} << kChunkBits,
              "the chunking rule must never cut more chunks than the tag numbers");

// The highest receive index is reserved for abort notices (abort_tag).
inline constexpr uint64_t kMaxReceives = (uint64_t{1} << kReceiveBits) - 1;
inline constexpr uint64_t kMaxAhead = uint64_t{1} << (kSequenceBits - 1);

inline constexpr uint64_t kFullMask = ~uint64_t{0};

inline uint64_t make(uint64_t sequence, uint64_t receive_index, uint64_t chunk) {
  constexpr uint64_t sequence_mask = (uint64_t{1} << kSequenceBits) - 1;
  return ((sequence & sequence_mask) << (kReceiveBits + kChunkBits)) | (receive_index << kChunkBits) |
         chunk;
}

// The one tag of abort notices (no data message has this receive index).
inline constexpr uint64_t abort_tag() { return kMaxReceives << kChunkBits; }

}  // namespace flexplan::tag
