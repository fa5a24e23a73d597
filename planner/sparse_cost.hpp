// Predicted time of the sparse all-reduce (runtime/sparse_allreduce.hpp, docs/sparse.md): the
// public-cloud top-k paper's Eq. 7-10 generalised to any tree, priced the way the runtime
// moves the data (one message per peer and step of its schedule), plus MSTopK's time; and the
// density below which it beats a dense all-reduce.
#pragma once

#include <optional>

#include "planner/cost_model.hpp"
#include "topology/topology.hpp"

namespace flexplan {

struct SparseCostParams {
  // MSTopK's CPU time per element of a slice (bench/sparse; docs/sparse.md gives the
  // measurement behind the default).
  double mstopk_seconds_per_element = 1e-9;
  double index_bytes = 4;  // the runtime's uint32 offsets
};

// Seconds per step for an n-byte vector of `element_bytes` elements at `density`. A machine is
// a learner's parent node; n_i learners on machine i, m machines.
//   1. reduce-scatter within machines: each learner sends and receives (n_i - 1)/n_i of the
//      vector over its own link; the slowest machine sets the time (Eq. 7's bandwidth term,
//      direct sends instead of a ring: one latency). With a reduction rate
//      (CostParams::reduce_bandwidth), summing the (n_i - 1)/n_i received bytes follows.
//   2. MSTopK over the largest slice, n / n_i bytes (Eq. 8).
//   3. pairs between machines: the exchange schedule's steps (ir/sparse_exchange.hpp), each at
//      its busiest link direction plus its longest transfer's latency and one hop overhead; a
//      transfer carries (index, value) pairs for the share of its range its sender holds values for
//      (the density; after a reduce, the union 1 - prod(1 - d) of its members'). On machines
//      under one switch: Eq. 9 on a tree, each machine's pairs once to every other machine.
//   4. all-gather within machines of the dense slices: step 1's transfers without its sums
//      (Eq. 10 sends the sparse sums; the runtime sends the slices dense, which intra-machine
//      links afford).
struct SparseCost {
  double reduce_scatter = 0, topk = 0, exchange = 0, all_gather = 0;
  double total() const { return reduce_scatter + topk + exchange + all_gather; }
};
SparseCost sparse_allreduce_cost(const Topology&, double bytes, double element_bytes, double density,
                                 const CostParams& = {}, const SparseCostParams& = {});

// The density at which the sparse all-reduce takes `dense_seconds` (its time grows with the
// density; found by bisection): below it sparse is faster. Empty when sparse loses even at the smallest
// density (its fixed part alone exceeds the dense time); 1 when it wins even at density 1.
std::optional<double> sparse_break_even_density(const Topology&, double bytes, double element_bytes,
                                                double dense_seconds, const CostParams& = {},
                                                const SparseCostParams& = {});

}  // namespace flexplan
