// The schedule builders for reduce-scatter, all-gather, broadcast and reduce (all-reduce's are
// in algorithms.hpp). All-gather and broadcast are built as copies; reduce-scatter and reduce
// are their transposes (transpose_copies): the same trees with the data flowing back and
// combining on the way, which the verifier proves for each schedule built.
#pragma once

#include <cstdint>

#include "ir/plan.hpp"
#include "topology/topology.hpp"

namespace flexplan {

// All-gather over equal shards (one unit per rank):
// the ring in depth-first order: P - 1 steps, each rank passing one shard on;
ir::Schedule plan_ring_allgather(const Topology&);
// Bruck's: ceil(log2 P) rounds, in round k each rank gets the min(2^k, P - 2^k) shards its
// partner 2^k ahead in depth-first order holds (any P, no extra round);
ir::Schedule plan_bruck_allgather(const Topology&);
// by machines: every learner's shard to its machine's leader, a ring among the leaders over the
// machines' blocks, each leader's whole vector to its machine.
ir::Schedule plan_hierarchical_allgather(const Topology&);

// tree-aware: one chain per shard, from its owner through every learner in depth-first order,
// each subtree entered once and left once, ending in the learner half the depth-first order
// away (in another child of the root). Every subtree of k <= P/2 of the P learners is then the
// chain's end for k shards from outside, so its link carries (P - k) / P of the data each way,
// the all-gather floor, and each shard crosses each link at most once in each direction.
ir::Schedule plan_tree_chains_allgather(const Topology&);
// The same at machine grain, for trees too big for a chain per shard: each machine's shards to
// its leader, one chain per machine's block from its leader through every other machine's
// leader (ending half the order away), each leader's vector to its machine. About 3P + M ops,
// M^2 chain members.
ir::Schedule plan_machine_chains_allgather(const Topology&);

// Through a relay per subtree, for trees too big for a chain per shard or per machine: bottom-up,
// the children of every branch exchange their blocks (a chain per child's block through the
// other children's relays), so that every child's relay holds its parent's block; then top-down,
// each branch's relay chains what its subtree lacks (everything outside it) through its other
// children's relays. A link above a subtree of k of the P learners carries (P - k) / P of the
// data down, what the subtree lacks, and up its own block plus what passes through; chains run
// between siblings only (a branch's fan-out in hops), so no chain grows with P. A branch's
// relay is its child's with the widest path up (the relays of one path are one learner, which
// sends the outside data once per level it relays). About 2 ops per child and fan-out squared
// group members per branch; relay_tree_size gives both without building.
// Through machines ("relay-machines"): a branch's chains down run on, after each machine
// child's relay, through that machine's other learners, so that the outside data reaches every
// learner of a machine in its parent's step (over the machine's own links, beside its NIC's);
// the machine's own chain then carries only its siblings' blocks. One step fewer's worth of
// data at large sizes, longer chains (a chunk's way through every learner) at small ones.
// Siblings by stars ("relay-stars"): the bottom-up exchange sends each child's block from its
// relay straight to every other child's relay (a star) instead of around a chain of them. Each
// relay's link carries the same blocks either way, but a block crosses one hop instead of up
// to a fan-out's: the latency of a wide tree's exchange at mid sizes (a rack of 20 machines:
// 19 hops through NICs per level, against one).
enum class SiblingExchange : uint8_t { Chains, Stars };
ir::Schedule plan_relay_tree_allgather(const Topology&, bool through_machines = false,
                                       SiblingExchange = SiblingExchange::Chains);
struct RelayTreeSize {
  uint64_t ops = 0, members = 0;
};
RelayTreeSize relay_tree_size(const Topology&, bool through_machines = false);

// Whether the ranks are numbered in the tree's depth-first order (then every subtree's shards
// are one run of units).
bool depth_first_is_rank_order(const Topology&);

// Broadcast from `root` (one unit):
// one chain through every learner in depth-first order from the root, which enters every
// subtree once (the runtime pipelines a chain in chunks);
ir::Schedule plan_chain_broadcast(const Topology&, int32_t root);
// a binomial tree over the depth-first order rotated to start at the root: ceil(log2 P) rounds.
ir::Schedule plan_binomial_broadcast(const Topology&, int32_t root);

// The transpose of a schedule that only copies (all-gather, broadcast): steps in reverse order,
// each broadcast a reduce to the same root with its group reversed (a chain runs backwards).
// An all-gather becomes a reduce-scatter over the same shards, a broadcast a reduce to the same
// root. Throws std::invalid_argument for a schedule with a reduce op or another collective.
ir::Schedule transpose_copies(const ir::Schedule& copies);

}  // namespace flexplan
