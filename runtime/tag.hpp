// UCX tag layout. A tag names one chunk of one hop on its receiver: (sequence, message, chunk
// field), high bits to low. The message number is the op's number in the schedule: ops counted
// in (step, op) order through the steps before (a compact pipeline's through its expansion),
// which both ends derive from their own ops and the steps' op counts (rank_program.hpp
// OpNumbers), so a rank numbers its messages without its peers' ops. A receiver receives at
// most one message per op (a chain visits each member once, a star broadcast sends once to each
// member) except a star reduce's root, which receives from every source: there the source's
// place among them fills the chunk field's high bits, and the op's chunks its low bits
// (Task::max_chunks = 2^20 / star_source_slots(sources)). So on a given receiver the tag alone
// names the message, whichever peer sends it and however steps and operations overlap.
//
//   63        52 51   50                      20 19              0
//   [ seq 12    ][ack][ message (op number) 31][ source | chunk 20 ]
//
// A schedule has at most 2^31 - 1 ops (ir::kMaxExpandedOps for pipelines plan.bin accepts, and
// checked at creation for the rest), so op numbers stay below the top one, which abort notices
// take; a star reduce has at most 2^20 sources (ir::kMaxStarSources, which the verifier checks
// when a plan is written), so its sources always fit the chunk field.
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
#include "ir/plan.hpp"

namespace flexplan::tag {

inline constexpr int kChunkBits = 20;
inline constexpr int kMessageBits = 31;
inline constexpr int kAckBits = 1;
inline constexpr int kSequenceBits = 12;
static_assert(kChunkBits + kMessageBits + kAckBits + kSequenceBits == 64);
static_assert(codegen::kMaxChunksPerRange == uint64_t{1} << kChunkBits,
              "the chunking rule must never cut more chunks than the tag numbers");
static_assert(ir::kMaxStarSources <= uint64_t{1} << kChunkBits,
              "a star reduce's sources must fit the chunk field");

// The highest message number is reserved for abort notices (abort_tag).
inline constexpr uint64_t kMaxMessages = (uint64_t{1} << kMessageBits) - 1;
inline constexpr uint64_t kMaxAhead = uint64_t{1} << (kSequenceBits - 1);

inline constexpr uint64_t kFullMask = ~uint64_t{0};

// `chunk_field`: the chunk, and a star reduce's source above it (Operation::tag_of).
inline uint64_t make(uint64_t sequence, uint64_t message, uint64_t chunk_field) {
  constexpr uint64_t sequence_mask = (uint64_t{1} << kSequenceBits) - 1;
  return ((sequence & sequence_mask) << (kAckBits + kMessageBits + kChunkBits)) | (message << kChunkBits) |
         chunk_field;
}

inline constexpr uint64_t kAckBit = uint64_t{1} << (kMessageBits + kChunkBits);
inline constexpr uint64_t kMaxCookie = (uint64_t{1} << (kMessageBits + kChunkBits)) - 1;

// A single-copy acknowledgement of operation `sequence`, naming the sender's cookie.
inline uint64_t ack(uint64_t sequence, uint64_t cookie) { return make(sequence, 0, 0) | kAckBit | cookie; }
// Matches every ack of operation `sequence` (the bits above the cookie).
inline constexpr uint64_t kAckMask = ~kMaxCookie;
inline uint64_t cookie_of(uint64_t ack_tag) { return ack_tag & kMaxCookie; }

// The one tag of abort notices (no data message has this number).
inline constexpr uint64_t abort_tag() { return kMaxMessages << kChunkBits; }

}  // namespace flexplan::tag
