// Summaries of contribution multisets for the verifier (internal to the IR library).
//
// A multiset of ranks' contributions is summarized as its size and two sums, modulo 2^64, of
// independent pseudo-random 64-bit hashes of its members. Summing summaries is taking the
// multiset union, so a reduce is a sum. Two different multisets of the same size get the same
// summary only if both hash sums collide.
//
// A multiset of more than P contributions holds some contribution twice and can never become
// part of a right result (a reduce only adds), so it is kept as one "over-count" summary,
// {P + 1, 0, 0}, whatever it holds. This keeps every count exact and every multiplicity at
// most P, which the collision bound relies on.
#pragma once

#include <cstdint>

namespace flexplan::ir::detail {

struct Summary {
  uint64_t count = 0;
  uint64_t hash1 = 0;
  uint64_t hash2 = 0;

  Summary& operator+=(const Summary& other) {
    count += other.count;
    hash1 += other.hash1;
    hash2 += other.hash2;
    return *this;
  }
  Summary& operator-=(const Summary& other) {
    count -= other.count;
    hash1 -= other.hash1;
    hash2 -= other.hash2;
    return *this;
  }
  // The canonical over-count summary when this holds more than world_size contributions.
  Summary capped(int32_t world_size) const {
    const uint64_t p = static_cast<uint64_t>(world_size);
    return count > p ? Summary{p + 1, 0, 0} : *this;
  }
  friend bool operator==(const Summary&, const Summary&) = default;
};

// The splitmix64 finalizer: a bijection on 64-bit words whose outputs look independent.
inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The summary of one rank's own contribution.
inline Summary contribution_of(int32_t rank) {
  const uint64_t r = static_cast<uint32_t>(rank);
  return Summary{1, mix64(2 * r), mix64(2 * r + 1)};
}

// The summary of every rank's contribution once: what each rank must end with.
inline Summary all_contributions(int32_t world_size) {
  Summary total;
  for (int32_t r = 0; r < world_size; ++r) total += contribution_of(r);
  return total;
}

}  // namespace flexplan::ir::detail
