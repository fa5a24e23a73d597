// What each collective promises: what every rank holds on each unit before a schedule runs and
// what it must hold after. The verifier, the exact replay and every tool read these, so adding
// a collective starts here.
//
//   collective       before                                after
//   allreduce        each rank: its own input everywhere    each rank: every input's sum
//   reduce_scatter   each rank: its own input everywhere    rank r, on its shard: every input's sum
//   allgather        rank r: its input on its shard only    each rank: on every shard, its owner's
//   broadcast        the root: its input; others nothing    each rank: the root's input
//   reduce           each rank: its own input everywhere    the root: every input's sum
//
// Where "after" names nothing for a rank or unit (a reduce-scatter off the rank's shard, a
// reduce off the root), any value is allowed there. Shards are explicit (Schedule::shards) or
// equal in rank order. All-gather and broadcast copy data and never combine it: a reduce op in
// them is an error (check_contract_fields).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/plan.hpp"

namespace flexplan::ir {

// Rank r's shard: shards[r], or [floor(r*U/P), floor((r+1)*U/P)) when the schedule has none.
UnitRange shard_of(const Schedule&, int32_t world_size, int32_t rank);
// The rank whose shard holds `unit` (the first such rank), or -1 where none does (explicit
// shards need not cover every unit: no rank's data is required there).
int32_t shard_owner(const Schedule&, int32_t world_size, uint64_t unit);

// What a rank holds on a unit, before or after.
enum class Holding : uint8_t {
  Nothing,   // before: no data (the buffer's contents are not part of the call); after: anything
  Own,       // before: the rank's own input
  Sum,       // after: every rank's input, each exactly once
  CopyOf,    // after: the input of `source` as it was before (a copy, not combined)
};
// A holding that lasts from the unit asked about up to `end` (exclusive).
struct HoldingRun {
  Holding holding = Holding::Nothing;
  int32_t source = -1;  // CopyOf: whose input
  uint64_t end = 0;
};
HoldingRun holding_before(const Schedule&, int32_t world_size, int32_t rank, uint64_t unit);
// An all-gather's run after ends where the units some shard holds end (ContractView::after).
HoldingRun holding_after(const Schedule&, int32_t world_size, int32_t rank, uint64_t unit);

// The same questions asked many times of one schedule (the verifier asks per rank and
// segment): explicit shards sorted once, so that each answer costs O(log P). An all-gather's
// run after ends where the units some shard holds end, not at each shard's end: `source` is
// the owner at the unit asked about. The free functions above ask a view made for the call.
class ContractView {
 public:
  ContractView(const Schedule&, int32_t world_size);
  HoldingRun before(int32_t rank, uint64_t unit) const;
  HoldingRun after(int32_t rank, uint64_t unit) const;
  int32_t owner(uint64_t unit) const;  // as shard_owner

 private:
  const Schedule& schedule_;
  int32_t world_size_;
  struct Owned {
    uint64_t begin, end;
    int32_t rank;
  };
  std::vector<Owned> owned_;          // explicit shards, non-empty, sorted by begin
  std::vector<UnitRange> owned_runs_; // their union, as maximal runs
};

// Whether the collective may combine data (reduce ops are allowed).
bool combines(Collective);

// The contract's own fields, without running anything: the collective is known; root in
// [0, world_size) for broadcast and reduce and 0 for the others; shards only for
// reduce-scatter and all-gather, one per rank, each within [0, units) with begin <= end, and
// pairwise disjoint; no reduce op in an all-gather or a broadcast; a pipeline held compact
// (slices > 1) only where the contract is the same on every unit (its slices would cut the
// shards). Returns the first fault in words, or empty.
std::string contract_fault(const Schedule&, int32_t world_size);

// The contract in words, for messages: "allgather (equal shards)", "broadcast from root 2".
std::string describe_contract(const Schedule&);

}  // namespace flexplan::ir
