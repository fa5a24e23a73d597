// Recursive doubling: the latency-optimal all-reduce. Shared by the flat algorithm and the one
// among machine leaders (rd_leader.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "ir/plan.hpp"

namespace flexplan {

// Rounds of one-hop exchanges after which every rank of `ranks` holds the sum over `ranks` of
// [0, units), in ceil(log2 |ranks|) rounds, none more: with 2^m + r ranks (0 < r < 2^m), the
// first 2^m exchange pairwise at distances 1, 2, 4, ... (m rounds) while the last r do the same
// among themselves (at most m rounds); in one more round every one of the 2^m takes the
// extras' sum from an extra, and every extra takes the 2^m's sum from one of them. Each rank
// receives at most once per round (it roots one reduce); one may send several times.
// `rounds` grows as needed; ops of round k go to rounds[k].
void append_recursive_doubling(const std::vector<int32_t>& ranks, uint64_t units,
                               std::vector<std::vector<ir::Op>>& rounds);

int ceil_log2(uint64_t n);

}  // namespace flexplan
