// Lowering of IR ops to the point-to-point transfers a backend runs. The runtime executes
// exactly these hops and the cost model prices exactly these hops, so both agree on how data
// moves.
//
// A reduce is a chain that ends at the root: the data enters at the first member, each next
// member adds its own and passes the sum on, and the root receives the total (adding its own
// only if it is in the group). The chain visits the group in cyclic order starting right after
// the root's position, so that a step whose ops have rotating roots (ring, FlexReduce) loads
// every link evenly. A broadcast is the mirror: a chain from the root through the other
// members in the same cyclic order. Large ranges are pipelined in chunks along the chain.
//
// A star op (ir::OpShape::Star) has no chain: each member other than the root sends to the root
// (reduce; the root combines its own data and the received ones in group order) or receives
// from it (broadcast). Its hops run side by side, one hop deep.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/plan.hpp"

namespace flexplan::codegen {

// The ranks a chain op's data visits, in order. For a reduce the last one is the root; for a
// broadcast the first one is. A root outside a reduce's group appears last all the same, and
// a broadcast root inside its group appears once. Not for star ops.
std::vector<int32_t> chain_order(const ir::Op& op);

// One hop of a chain: `src` sends the range to `dst`. For a reduce, `dst` adds what it
// receives to its own contribution when `dst_contributes`, else it only stores (or forwards).
struct Hop {
  int32_t src;
  int32_t dst;
  bool dst_contributes;
};
// The hops of any op: a chain's in chain order, a star's in group order.
std::vector<Hop> lower_op(const ir::Op& op);
// The same, appended to `out` (for callers that lower many ops into one reused buffer).
void append_hops(const ir::Op& op, std::vector<Hop>& out);
// How many hops lower_op gives, without lowering: m - 1 for m members, m where the root is not
// among them (whatever the op's range; an empty range's op is skipped by its callers).
inline size_t hop_count(const ir::Op& op) { return op.group.size() - (op.root_in_group() ? 1 : 0); }

}  // namespace flexplan::codegen
