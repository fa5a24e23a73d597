// The alpha-beta cost model (paper Eq. 1: T = alpha + n/w per link).
//
// The general evaluator prices any schedule on any tree the way the runtime moves the data:
// every op becomes the chain of point-to-point hops of codegen::lower_op, pipelined in chunks.
// Each hop is routed over the tree and adds the op's bytes to every link direction it crosses;
// hops sharing a link direction within a step share its bandwidth. A step then costs
//   max over link directions (bytes / bandwidth)  +  max over ops (chain latency),
// where a chain's latency is the sum over its hops of the path latency plus a per-hop software
// overhead (CostParams::hop_overhead, default 0). Steps run one after another, so a schedule
// costs T(n) = latency + per_byte * n: a line in the message size n, which lets the planner find
// exactly where algorithms cross.
//
// The closed forms of the paper (Eq. 2, 3, 6) are here too, with alpha = the latency of one
// hop as the evaluator prices it; tests check they agree with the evaluator where they apply.
#pragma once

#include <vector>

#include "ir/plan.hpp"
#include "topology/topology.hpp"

namespace flexplan {

struct CostParams {
  double hop_overhead = 0;  // seconds added per hop: software cost of one send/receive
};

// T(n) = latency + per_byte * n, in seconds for n bytes.
struct LinearCost {
  double latency = 0;
  double per_byte = 0;
  double at(double bytes) const { return latency + per_byte * bytes; }
  LinearCost& operator+=(const LinearCost& other) {
    latency += other.latency;
    per_byte += other.per_byte;
    return *this;
  }
};

// The general evaluator: per step, and the whole schedule. Throws std::invalid_argument naming
// the step and op when an op names a rank the topology does not have.
std::vector<LinearCost> evaluate_steps(const Topology&, const ir::Schedule&,
                                       const CostParams& = {});
LinearCost evaluate_schedule(const Topology&, const ir::Schedule&, const CostParams& = {});

// alpha of a hop between learners in different children of `branch`: the largest path latency
// between two such learners, plus the hop overhead (0 when the branch has one child).
double hop_alpha(const Topology&, NodeId branch, const CostParams& = {});

// Eq. 2: ring reduce-scatter of n bytes among d learners over links of bandwidth w,
// (d - 1)(alpha + n / (d w)).
double ring_reduce_scatter_time(double bytes, int learners, double bandwidth, double alpha);

// Ring all-reduce over the depth-first ring (plan_ring): 2 x Eq. 2 with w = the slowest link
// that separates learners (the ring crosses each once per step) and alpha = the slowest hop.
LinearCost ring_cost(const Topology&, const CostParams& = {});

// BlueConnect, Eq. 3 (in the corrected form of Eq. 11: level l reduce-scatters
// n / prod_{i<l} delta_i bytes among delta_l learners over the slowest of the level-k links
// shared by prod_{j<k} delta_j rings, k <= l). Symmetric trees only: throws
// std::invalid_argument otherwise.
LinearCost blueconnect_cost(const Topology&, const CostParams& = {});

// FlexReduce, Eq. 6, for any tree: for each level l the slowest branch node y of that level,
// (d_y - 1) alpha_y plus the slowest link below y carrying (d_y - 1)/d_y of the share its
// subtree holds; doubled for the all-gather. Not a line in general (a max of lines per level).
double flexreduce_time(const Topology&, double bytes, const CostParams& = {});

// The hierarchical schedule (plan_hierarchical) priced without building it: the local reduce
// and broadcast load every learner link of a machine with the whole vector, the leader ring is
// Eq. 2 among the leaders. Not a paper equation; exact like ring_cost.
LinearCost hierarchical_cost(const Topology&, const CostParams& = {});

// The information floor: a link with learners on both sides carries at least n bytes each way,
// so no all-reduce beats max over such links of n / w. Zero for a single learner.
double information_floor(const Topology&, double bytes);

// nccl-tests conventions: algbw = n / t, busbw = algbw * 2 (P - 1) / P.
double algorithm_bandwidth(double bytes, double seconds);
double bus_bandwidth(double bytes, double seconds, int learners);

}  // namespace flexplan
