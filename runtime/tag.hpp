// UCX tag layout. A tag names one chunk of one hop on its receiver: (sequence, receive index,
// chunk), high bits to low. The receive index numbers the receiver's receives within the
// schedule, in (step, op) order: both ends compute it from the schedule (rank_program.hpp), and
// since every op's chain has one sender per receiver, on a given receiver the tag alone names
// the message, whichever peer sends it and however operations overlap.
//
//   63        52 51   50                      20 19          0
//   [ seq 12    ][ack][ receive index 31        ][ chunk 20   ]
//
// Tags with the ack bit set are single-copy acknowledgements (single_copy.hpp): a receiver that
// read a chunk straight out of its sender's memory tells the sender so under ack(sequence,
// cookie), the cookie being what the sender put in the chunk's descriptor. The sender takes
// every ack of an operation with one receive masked to (sequence, ack bit).
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
inline constexpr int kReceiveBits = 31;
inline constexpr int kAckBits = 1;
inline constexpr int kSequenceBits = 12;
static_assert(kChunkBits + kReceiveBits + kAckBits + kSequenceBits == 64);
static_assert(codegen::kMaxChunksPerRange == uint64_t{1} << kChunkBits,
              "the chunking rule must never cut more chunks than the tag numbers");

// The highest receive index is reserved for abort notices (abort_tag).
inline constexpr uint64_t kMaxReceives = (uint64_t{1} << kReceiveBits) - 1;
inline constexpr uint64_t kMaxAhead = uint64_t{1} << (kSequenceBits - 1);

inline constexpr uint64_t kFullMask = ~uint64_t{0};

inline uint64_t make(uint64_t sequence, uint64_t receive_index, uint64_t chunk) {
  constexpr uint64_t sequence_mask = (uint64_t{1} << kSequenceBits) - 1;
  return ((sequence & sequence_mask) << (kAckBits + kReceiveBits + kChunkBits)) |
         (receive_index << kChunkBits) | chunk;
}

inline constexpr uint64_t kAckBit = uint64_t{1} << (kReceiveBits + kChunkBits);
inline constexpr uint64_t kMaxCookie = (uint64_t{1} << (kReceiveBits + kChunkBits)) - 1;

// A single-copy acknowledgement of operation `sequence`, naming the sender's cookie.
inline uint64_t ack(uint64_t sequence, uint64_t cookie) { return make(sequence, 0, 0) | kAckBit | cookie; }
// Matches every ack of operation `sequence` (the bits above the cookie).
inline constexpr uint64_t kAckMask = ~kMaxCookie;
inline uint64_t cookie_of(uint64_t ack_tag) { return ack_tag & kMaxCookie; }

// The one tag of abort notices (no data message has this receive index).
inline constexpr uint64_t abort_tag() { return kMaxReceives << kChunkBits; }

}  // namespace flexplan::tag
