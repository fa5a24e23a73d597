// The alpha-beta cost model (paper Eq. 1: T = alpha + n/w per link), extended to the runtime's
// chunk pipeline.
//
// The general evaluator prices any schedule on any tree the way the runtime moves the data:
// every op becomes the hops of codegen::lower_op, and the runtime cuts each op's range into
// chunks (codegen::chunk_range) that flow through the op's hops like a pipeline. A step costs
// the larger of
//   - its bandwidth term: max over link directions of (all its bytes there / bandwidth), plus
//     the slowest hop's latency (the last byte still has to arrive), and
//   - its slowest chain's critical path: every hop's latency, the first chunk's way through
//     every hop, and the other chunks through the chain's slowest hop.
// Hops share links. Hop k of every chain of a step forms the step's round k (a star op's hops
// are all round 0): the first chunk crosses hop k at the pace that hop's busiest link allows
// while round k's hops share it, the later chunks at the pace the whole step's load on it
// allows. With one chunk per range (store and forward) this is one ring-like step per round;
// with many it tends to the bandwidth term.
// Steps run one after another (a rank enters step s+1 once its step-s part is done), so a
// schedule costs the sum of its steps: a function of the message size n that is linear between
// the sizes where an op's chunk count changes (ScheduleCost).
//
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "codegen/chunking.hpp"
#include "codegen/lowering.hpp"
#include "ir/plan.hpp"
#include "topology/topology.hpp"

namespace flexplan {

// The runtime's software cost of one hop (posting, matching, completing a send and its receive),
// measured by flexplan_overhead as one 2-rank exchange through the runtime on one host, where
// the transfer itself costs almost nothing (docs/runtime.md, docs/flexbench.md "The runtime's
// own overhead": 0.36-0.71 us medians; the later, larger figure). The plan, predict and whatif
// commands price with it unless --hop-overhead says otherwise; CostParams{} keeps 0 so that the
// model's own tests stay exact.
inline constexpr double kMeasuredHopOverhead = 0.71e-6;

// What a star op loses to incast where its flows share a link: its hops all start at once, so
// on the links between its root and the rest of the tree, k > 1 TCP flows of the op meet at one
// queue (converging into the root for a reduce, leaving it for a broadcast) and lose packets
// that the alpha-beta model's even share does not count. Measured on the emulated cluster
// under cubic TCP (docs/cost-model.md, Incast): on equal links, flexreduce-bw's stars 16%
// (unpipelined) to 26-33% (@4) slower than predicted, FlexReduce's chains within 1%; the
// smallest figure is taken. The plan, predict and whatif commands price with it unless
// --incast-loss says otherwise; CostParams{} keeps 0 so that the model's own tests stay exact.
inline constexpr double kMeasuredIncastLoss = 0.16;

// What a rank's step waits for, in the critical path (critical_path.hpp), besides the data it
// receives.
enum class SliceProgress {
  // All of the rank's tasks of the step before: the runtime step by step (FLEXPLAN_STEP_OVERLAP=0,
  // or drift checks on), an upper bound of it with its steps overlapping.
  PerRank,
  // Only its own slice's step before (each slice its own sequence of steps; a rank's progress
  // thread still does all of its hops' overheads, and where learners reduce on the CPU its core
  // does its copies inside its machine and its reductions, which bound its end): the runtime
  // with its steps overlapping (runtime/operation.hpp), its default. The library's default
  // since 2026-11-30: within 0.90-1.06 of the overlapped runtime on the emulated cluster; on one
  // host, where the copies and the reductions share the cores, its plans are the step-by-step
  // ones now that the cores are priced (docs/planner-quality.md, "Per slice by default").
  PerSlice,
};

struct CostParams {
  // Seconds added per hop: software cost of one send/receive. A star op's root handles its
  // members' hops one after another, so the k-th of them (from 1) pays k overheads.
  double hop_overhead = 0;
  // Bytes per second at which a learner sums a received range into its own (the runtime's
  // reduction); 0: free, not modelled. A learner's reductions in a step are a resource like a
  // link direction: the step takes at least (bytes it reduces) / reduce_bandwidth.
  double reduce_bandwidth = 0;
  // The runtime's pipeline chunk (runtime Options::chunk_bytes).
  double chunk_bytes = static_cast<double>(codegen::kDefaultChunkBytes);
  // A star op's flows load the links where two or more of them meet (star_incast) this much
  // more than their bytes (0.16: 16% more; kMeasuredIncastLoss); 0: not modelled.
  double incast_loss = 0;
  // How the critical path lets a rank's slices progress (SliceProgress above).
  SliceProgress slice_progress = SliceProgress::PerSlice;
  // Cores of the one host every learner runs on (one host, or an emulated cluster on one host);
  // 0: each learner has cores of its own. Where given, a call takes at least its hops' software
  // cost over these cores (ScheduleCost::busy_floor, host_busy_floor): every hop costs its two
  // ends a hop overhead between them, and that work shares the host's cores.
  int host_cores = 0;
};

// Where a star op's flows meet: on its root's side of the tree, the link above an ancestor x of
// the root carries the hops to the members outside x's subtree, so two or more of them where x
// is deeper than the second-shallowest lowest common ancestor of the root and a member. Those
// links (not the root learner's own: inside its machine) carry the op's hops' bytes times
// `factor`; the members' sides and a chain's hops (one flow per hop at a time) carry their
// bytes. Every pricer (evaluator, pipeline windows, critical path, floors) walks a hop's path
// with this, so they agree; the reductions and a chain's pace keep the plain share.
// Depends on the tree's shape, not its rates: a faster link never raises a price.
struct StarIncast {
  double factor = 1;    // 1: no link carries two of the op's flows, or not modelled
  NodeId root = -1;     // the star's root learner
  int deeper_than = 0;  // the root's ancestors deeper than this carry two or more flows
  // The factor on the load of the link above `node`, a node on a hop's path on the root's
  // side (the side that starts or ends at `root`), at depth `depth`.
  double at(NodeId node, int depth) const { return node != root && depth > deeper_than ? factor : 1; }
};
StarIncast star_incast(const Topology&, const ir::Op&, const CostParams&);

// Whether the receiver of hop `index` of lower_op(op) sums what arrives (and so loads its
// reductions, CostParams::reduce_bandwidth): a reduce's hop into a contributing rank; a root
// outside a star reduce's group stores its first arrival and sums the others; a root outside a
// chain's group only stores.
bool hop_sums(const ir::Op& op, const codegen::Hop& hop, size_t index);
// A star's root posts, matches and completes its members' hops one after another: given the
// star's hop latencies (each with one hop overhead), adds to each the overheads of the hops its
// root handles before it, farthest first (a root that takes arrivals as they come, or sends to
// the far members first): the k-th farthest pays k - 1 more. Independent of the group's order,
// so a star reduce costs what the broadcast it transposes costs. `latency(i)` is a reference
// to hop i's latency.
template <class Latency>
void queue_star_hops(size_t hops, double overhead, Latency&& latency) {
  if (overhead <= 0 || hops < 2) return;
  std::vector<size_t> order(hops);
  for (size_t i = 0; i < hops; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return latency(a) > latency(b); });
  for (size_t k = 1; k < hops; ++k) latency(order[k]) += static_cast<double>(k) * overhead;
}
// Throws std::invalid_argument naming the schedule, step and op where `op` (op `index` of step
// `step`, or of its expansion for a compact pipeline) names a rank outside [0, learners) or a
// range outside the schedule's units.
void check_op_ranks(const ir::Schedule& schedule, const ir::Op& op, size_t step, size_t index,
                    int learners);

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

// One op's chain through a step. For a range of r = share * n bytes in C = ceil(r / chunk)
// chunks of c = r / C bytes, its last chunk arrives after
//   latency + c * first_chunk + (r - c) * steady
// (seconds per range byte: first_chunk sums the hops' paces while their round shares the links,
// steady is the slowest hop's pace while the whole step does).
struct ChainCost {
  double latency = 0;
  double share = 0;
  double first_chunk = 0;
  double steady = 0;
  double at(double bytes, double chunk_bytes) const;
  friend bool operator==(const ChainCost&, const ChainCost&) = default;
};

struct StepCost {
  double per_byte = 0;     // the busiest link direction: seconds per message byte
  double hop_latency = 0;  // the slowest single hop's latency (+ hop overhead)
  // The chains that can outlast the bandwidth term (a one-hop op never does), thinned to those
  // slowest at some message size.
  std::vector<ChainCost> chains;
  uint64_t repeat = 1;  // closed forms describe runs of identical steps once
  double at(double bytes, double chunk_bytes) const;  // one of the `repeat` steps
};

// Builds a step from its bandwidth term and its chains, dropping the chains that never
// decide its price. The evaluator and the closed forms both go through here.
StepCost make_step(double per_byte, double hop_latency, std::vector<ChainCost> chains,
                   double chunk_bytes, uint64_t repeat = 1);

struct ScheduleCost {
  std::vector<StepCost> steps;
  double chunk_bytes = static_cast<double>(codegen::kDefaultChunkBytes);
  // Seconds no call takes less than, whatever its size, beside its steps: its hops' software
  // cost over the host's cores where learners share them (CostParams::host_cores); 0: none.
  double busy_floor = 0;

  double at(double bytes) const;  // seconds for an n-byte message
  double latency() const { return at(0); }
  // The line the cost approaches for large messages (every range many chunks long).
  LinearCost asymptote() const;
  uint64_t step_count() const;
};

// A call of `hops` hops (lowered, every slice's) takes at least this on learners sharing
// CostParams::host_cores cores: each hop costs its two ends a hop overhead between them (half
// each, as the critical path charges a rank's progress thread), and all of it shares the cores.
// 0 where the learners have cores of their own (host_cores 0).
double host_busy_floor(uint64_t hops, const CostParams& params);
// The hops a built schedule lowers to, every slice's (a compact pipeline repeats its base once
// per slice): an op of m members has m - 1, or m where its root is not among them; an op of an
// empty range has none.
uint64_t lowered_hop_count(const ir::Schedule&);

// Steps the evaluator priced, for pricing an equal step of another schedule without routing it
// again: rows built by one builder share steps (the all-gather race's relay-stars and
// relay-machines share the steps down where no branch of the depth is or has a machine folded
// into its parent's chains, and so do their transposes; before relay-stars, relay-tree and
// relay-machines shared their bottom-up exchange too, 1.2 of 1.6 million ops on the generated
// million-learner tree). Kept for unpipelined schedules only (a pipeline's expansion step mixes
// its base's steps); a step's price depends on its ops and its
// schedule's units alone, so those are the key (found by a hash, confirmed by comparing the
// ops). Holds the priced schedules' steps (shared, not copied) for as long as it lives. One
// memo per topology and CostParams: the caller keeps to that.
class StepPriceMemo {
 public:
  // Both do nothing for a pipeline held compact (slices > 1).
  const StepCost* find(const ir::Schedule&, size_t step) const;
  void remember(const ir::Schedule&, size_t step, const StepCost&);
  size_t steps_found() const { return found_; }  // how many find() answered, for progress lines

 private:
  struct Entry {
    ir::SharedVector<ir::Step> steps;  // holds the step alive
    size_t step = 0;
    uint64_t units = 0;
    StepCost cost;
  };
  std::unordered_multimap<uint64_t, Entry> entries_;  // by the step's hash
  mutable size_t found_ = 0;
};

// The general evaluator: per step, and the whole schedule. Throws std::invalid_argument naming
// the step and op when an op names a rank the topology does not have. With a memo, an
// unpipelined schedule's steps found there take the price remembered, and the others priced
// are remembered.
std::vector<StepCost> evaluate_steps(const Topology&, const ir::Schedule&, const CostParams& = {},
                                     StepPriceMemo* memo = nullptr);
ScheduleCost evaluate_schedule(const Topology&, const ir::Schedule&, const CostParams& = {},
                               StepPriceMemo* memo = nullptr);

// alpha of a hop between learners in different children of `branch`: the largest path latency
// between two such learners, plus the hop overhead (0 when the branch has one child).
double hop_alpha(const Topology&, NodeId branch, const CostParams& = {});

// Eq. 2: ring reduce-scatter of n bytes among d learners over links of bandwidth w,
// (d - 1)(alpha + n / (d w)).
double ring_reduce_scatter_time(double bytes, int learners, double bandwidth, double alpha);

// Ring all-reduce over the depth-first ring (plan_ring): 2(P - 1) one-hop steps, each moving
// n / P over the slowest link that separates learners (the ring crosses each once per step)
// after the slowest hop's alpha: 2 x Eq. 2. Exact.
ScheduleCost ring_cost(const Topology&, const CostParams& = {});

// BlueConnect, Eq. 3 (in the corrected form of Eq. 11: level l reduce-scatters
// n / prod_{i<l} delta_i bytes among delta_l learners over the slowest of the level-k links
// shared by prod_{j<k} delta_j rings, k <= l). Symmetric trees only: throws
// std::invalid_argument otherwise. Exact for plan_blueconnect (one-hop steps).
ScheduleCost blueconnect_cost(const Topology&, const CostParams& = {});

// FlexReduce, Eq. 6, for any tree: for each level l the slowest branch node y of that level,
// (d_y - 1) alpha_y plus the slowest link below y carrying (d_y - 1)/d_y of the share its
// subtree holds; doubled for the all-gather. The paper's model: it pays every hop's alpha in
// sequence, which the runtime's pipelined chains overlap once ranges span several chunks.
double flexreduce_time(const Topology&, double bytes, const CostParams& = {});

// The hierarchical schedule (plan_hierarchical) priced without building it: local reduce
// chains, the leader ring (Eq. 2 among the leaders), local broadcast chains. Exact.
ScheduleCost hierarchical_cost(const Topology&, const CostParams& = {});

// nccl-tests conventions: algbw = n / t, busbw = algbw * 2 (P - 1) / P.
double algorithm_bandwidth(double bytes, double seconds);
double bus_bandwidth(double bytes, double seconds, int learners);

}  // namespace flexplan
