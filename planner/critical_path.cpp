// The critical-path price of a schedule, as the runtime's ranks run it (critical_path.hpp).
#include "planner/critical_path.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include "codegen/lowering.hpp"
#include "ir/pipeline_form.hpp"
#include "planner/link_table.hpp"
#include "planner/pipeline.hpp"

namespace flexplan {
namespace {

// latency + per_byte x n seconds for an n-byte message.
struct Line {
  double latency = 0;
  double per_byte = 0;
};

// A rank's finishing time as a function of n: the upper envelope over n >= 0 of the lines of
// its dependency chains, by per_byte ascending (latency then descending). It holds few lines:
// one per size range over which a different chain is the longest.
using Envelope = std::vector<Line>;

bool nearly(double a, double b) { return std::abs(a - b) <= 1e-12 * std::max(std::abs(a), std::abs(b)); }

bool by_pace(const Line& x, const Line& y) {
  return x.per_byte != y.per_byte ? x.per_byte < y.per_byte : x.latency > y.latency;
}

// Reduces `lines` to their upper envelope over n >= 0; the first `sorted` of them are in
// by_pace order, and so are the rest when `sorted` is nonzero (two envelopes to merge).
void keep_envelope(Envelope& lines, size_t sorted = 0) {
  if (sorted == 0)
    std::sort(lines.begin(), lines.end(), by_pace);
  else
    std::inplace_merge(lines.begin(), lines.begin() + static_cast<std::ptrdiff_t>(sorted), lines.end(), by_pace);
  size_t kept = 0;
  for (const Line& line : lines) {
    if (kept > 0 && nearly(lines[kept - 1].per_byte, line.per_byte)) {
      if (line.latency <= lines[kept - 1].latency) continue;
      --kept;  // (the same pace up to rounding: the later start decides)
    }
    // A steeper line starting no lower is above the earlier ones at every n >= 0.
    while (kept > 0 && lines[kept - 1].latency <= line.latency) --kept;
    // The middle of three is above neither neighbour where they cross before it takes over.
    while (kept >= 2) {
      const Line& a = lines[kept - 2];
      const Line& b = lines[kept - 1];
      if ((a.latency - line.latency) * (b.per_byte - a.per_byte) >
          (a.latency - b.latency) * (line.per_byte - a.per_byte))
        break;
      --kept;
    }
    lines[kept++] = line;
  }
  lines.resize(kept);
}

// Whether `line` is nowhere above the envelope on n >= 0: envelope minus line is convex, so it
// suffices to look at n = 0, at the envelope's corners, and at the slope beyond the last.
bool below(const Envelope& envelope, const Line& line) {
  if (line.latency > envelope.front().latency || line.per_byte > envelope.back().per_byte) return false;
  for (size_t i = 0; i + 1 < envelope.size(); ++i) {
    const Line& a = envelope[i];
    const Line& b = envelope[i + 1];
    const double corner = (a.latency - b.latency) / (b.per_byte - a.per_byte);
    if (line.latency + line.per_byte * corner > a.latency + a.per_byte * corner) return false;
  }
  return true;
}

// into = max(into, from + add). Most calls change nothing (another chain already decides), and
// they are the pricer's inner loop: those return before anything is sorted or allocated.
// `work` counts the lines compared or sorted (critical_path_cost's budget).
void raise(Envelope& into, const Envelope& from, Line add, uint64_t& work) {
  work += from.size() * into.size() + 1;
  if (into.empty()) {
    for (const Line& line : from) into.push_back({line.latency + add.latency, line.per_byte + add.per_byte});
    return;
  }
  bool changes = false;
  for (const Line& line : from)
    if (!below(into, Line{line.latency + add.latency, line.per_byte + add.per_byte})) changes = true;
  if (!changes) return;
  const size_t sorted = into.size();
  for (const Line& line : from) into.push_back({line.latency + add.latency, line.per_byte + add.per_byte});
  work += into.size();
  keep_envelope(into, sorted);  // (a line shifted by `add` keeps its order among the others)
}

// A hop of a base step, lowered once.
struct Hop {
  int32_t src = 0, dst = 0;
  NodeId from = 0, to = 0;
  double latency = 0;        // path latency, hop overhead and the star root's queue
  double send_overhead = 0;  // what the sender spends on it besides its bytes
  int32_t after = -1;        // the chain hop it waits for (index in its step), or -1
  bool sums = false;         // the receiver sums it (loads its reductions)
};

using SparseLoads = std::vector<std::pair<uint32_t, double>>;

class CriticalPath {
 public:
  // The base's steps are lowered to hops and their loads gathered as the pricing reaches them
  // (lower_through): a price that passes its budget early (a million learners) walks the paths
  // of the steps it priced, not of every step.
  CriticalPath(const Topology& topo, const ir::Schedule& base, const CostParams& params)
      : topo_(topo),
        base_(base),
        links_(topo, params.reduce_bandwidth),
        params_(params),
        learners_(topo.num_learners()),
        load_(3 * static_cast<size_t>(topo.num_nodes()), 0),
        nodes_(static_cast<uint32_t>(topo.num_nodes())) {
    if (base.units == 0)
      throw std::invalid_argument(fmt::format("schedule '{}' has zero units", base.algorithm));
    steps_.resize(base.steps.size());
  }

  // Lowers base steps up to `last` not lowered yet, in order (each walk adds its loads to
  // load_ and takes them, so nothing else may hold loads there meanwhile).
  void lower_through(size_t last) {
    const double units = static_cast<double>(base_.units);
    for (; lowered_ <= last && lowered_ < base_.steps.size(); ++lowered_) {
      const size_t s = lowered_;
      auto& hops = steps_[s];
      const auto& ops = base_.steps[s].ops;
      for (size_t i = 0; i < ops.size(); ++i) {
        const ir::Op& op = ops[i];
        check_op_ranks(base_, op, s, i, topo_.num_learners());
        if (op.end == op.begin) continue;
        const double share = static_cast<double>(op.end - op.begin) / units;
        lowered_hops_.clear();
        codegen::append_hops(op, lowered_hops_);
        const size_t first = hops.size();
        const StarIncast incast = star_incast(topo_, op, params_);
        for (size_t h = 0; h < lowered_hops_.size(); ++h) {
          Hop hop;
          hop.src = lowered_hops_[h].src;
          hop.dst = lowered_hops_[h].dst;
          hop.from = topo_.learner_node(hop.src);
          hop.to = topo_.learner_node(hop.dst);
          hop.sums = params_.reduce_bandwidth > 0 && hop_sums(op, lowered_hops_[h], h);
          hop.latency = links_.walk(hop.from, hop.to, share, incast,
                                    [this](uint32_t direction, double load) {
                                      add_load(direction, load);
                                      ++walked_;
                                    }) +
                        params_.hop_overhead;
          if (hop.sums) add_load(2 * nodes_ + static_cast<uint32_t>(hop.to), share);
          charge_cores(hop, share);
          if (op.shape == ir::OpShape::Chain && h > 0) hop.after = static_cast<int32_t>(hops.size() - 1);
          hops.push_back(hop);
        }
        if (op.shape == ir::OpShape::Star) {
          std::vector<double> path(hops.size() - first);
          for (size_t k = 0; k < path.size(); ++k) path[k] = hops[first + k].latency;
          queue_star_hops(path.size(), params_.hop_overhead, [&](size_t k) -> double& { return hops[first + k].latency; });
          // A broadcast's root posts its sends one after another; a reduce's members send once
          // each, the queue is at the root that receives.
          for (size_t k = 0; k < path.size(); ++k)
            hops[first + k].send_overhead = op.kind == ir::OpKind::Broadcast
                                                ? hops[first + k].latency - path[k] + params_.hop_overhead
                                                : params_.hop_overhead;
        } else {
          for (size_t h = first; h < hops.size(); ++h) hops[h].send_overhead = params_.hop_overhead;
        }
        for (size_t h = first; h < hops.size(); ++h) slowest_hop_ = std::max(slowest_hop_, hops[h].latency);
      }
      loads_.push_back(take_loads());
    }
  }

  // Null once `budget` lines have been compared or sorted (`work` holds them).
  std::optional<ScheduleCost> cost(uint32_t slices, SliceProgress progress, uint64_t budget, uint64_t& work) {
    if (slices == 0) throw std::invalid_argument("critical path: zero slices");
    const double scale = 1.0 / slices;
    // What waits for what: a rank (today's runtime), or a rank's slice (each slice's steps in
    // order).
    const bool per_slice = progress == SliceProgress::PerSlice;
    const size_t keys = static_cast<size_t>(learners_) * (per_slice ? slices : 1);
    std::vector<Envelope> ready(keys, Envelope{Line{}});
    std::vector<Envelope> finish(keys);
    std::vector<double> thread_work(per_slice ? static_cast<size_t>(learners_) : 0, 0);
    std::vector<char> touched_key(keys, 0);
    std::vector<size_t> touched;
    std::vector<Envelope> arrivals;  // of a step's hops, for the chain hops after them
    Envelope waited;                 // a chain hop's start
    std::vector<uint32_t> ends(keys, 0);  // hop ends per key in the step
    const auto finishing = [&](size_t key) -> Envelope& {
      if (!touched_key[key]) {
        touched_key[key] = 1;
        touched.push_back(key);
        finish[key].assign(ready[key].begin(), ready[key].end());
      }
      return finish[key];
    };
    size_t t = 0;  // the pipeline's step
    for (const auto& [bounds, repeat] : pipeline_windows(steps_.size(), slices)) {
      lower_through(bounds.second);
      work += std::exchange(walked_, 0);  // a link walked costs about what a line compared does
      const std::vector<double>& paces = window_paces(bounds.first, bounds.second);
      for (uint64_t r = 0; r < repeat; ++r, ++t) {
        size_t k = 0;
        for (size_t b = bounds.first; b <= bounds.second; ++b) {
          const auto& hops = steps_[b];
          const size_t slice = per_slice ? t - b : 0;
          const auto key = [&](int32_t rank) { return static_cast<size_t>(rank) * (per_slice ? slices : 1) + slice; };
          arrivals.resize(hops.size());
          for (size_t h = 0; h < hops.size(); ++h) {
            const Hop& hop = hops[h];
            const double pace = paces[k++] * scale;
            const size_t src = key(hop.src), dst = key(hop.dst);
            const Envelope* start = &ready[src];
            if (hop.after >= 0) {
              waited.assign(ready[src].begin(), ready[src].end());
              raise(waited, arrivals[static_cast<size_t>(hop.after)], Line{}, work);
              start = &waited;
            }
            raise(finishing(dst), *start, Line{hop.latency, pace}, work);
            raise(finishing(src), *start, Line{hop.send_overhead, pace}, work);
            ++ends[src];
            ++ends[dst];
            if (h + 1 < hops.size() && hops[h + 1].after == static_cast<int32_t>(h)) {
              arrivals[h].clear();
              raise(arrivals[h], *start, Line{hop.latency, pace}, work);
            }
          }
        }
        if (work > budget) return std::nullopt;
        for (const size_t key : touched) {
          // One progress thread handles all of a rank's hops in the step, one after another: half
          // a hop overhead per end (the overhead is measured as one send and one receive on each
          // of two ranks). Per slice, the thread takes the slices' steps in turn.
          // Per slice, the thread's whole work bounds the end (below) instead of ordering the
          // slices, which would couple them again through the order taken.
          const Line busy{0.5 * params_.hop_overhead * ends[key], 0};
          if (params_.hop_overhead > 0) raise(finish[key], ready[key], busy, work);
          if (per_slice) thread_work[key / slices] += busy.latency;
          ends[key] = 0;
          std::swap(ready[key], finish[key]);  // (both keep their storage)
          touched_key[key] = 0;
        }
        touched.clear();
      }
    }
    lower_through(steps_.size());  // (every step is by now, unless the base has none)
    Envelope last;
    for (const Envelope& envelope : ready) last.insert(last.end(), envelope.begin(), envelope.end());
    for (size_t rank = 0; rank < thread_work.size(); ++rank)
      last.push_back(Line{thread_work[rank], core_per_byte_.empty() ? 0 : core_per_byte_[rank]});
    keep_envelope(last);
    ScheduleCost cost;
    cost.chunk_bytes = params_.chunk_bytes;
    StepCost step;
    step.per_byte = busiest_total();
    step.hop_latency = slowest_hop_;
    for (const Line& line : last) step.chains.push_back(ChainCost{line.latency, 1.0, line.per_byte, line.per_byte});
    cost.steps.push_back(std::move(step));
    return cost;
  }

 private:
  // Learners that reduce on the CPU (CostParams::reduce_bandwidth given: host processes, not
  // GPUs) also copy on it: a rank's own core does the copies of its hops inside its machine
  // (both ends: shared memory is written by the sender and read by the receiver, at the link's
  // rate, which inside a host is the copy's) and its reductions, one after another however its
  // slices overlap (per slice, this bounds the rank's end beside its overheads). Inside a
  // machine: the two learners share a parent that is not the root (a switch of learners at the
  // top is a network, not a machine's memory).
  void charge_cores(const Hop& hop, double share) {
    if (params_.reduce_bandwidth <= 0) return;
    if (core_per_byte_.empty()) core_per_byte_.assign(static_cast<size_t>(learners_), 0);
    const NodeId machine = links_.parent[hop.from];
    if (machine == links_.parent[hop.to] && machine != topo_.root()) {
      const double copy = share * std::max(links_.inverse_bandwidth[2 * static_cast<uint32_t>(hop.from)],
                                           links_.inverse_bandwidth[2 * static_cast<uint32_t>(hop.to) + 1]);
      core_per_byte_[static_cast<size_t>(hop.src)] += copy;
      core_per_byte_[static_cast<size_t>(hop.dst)] += copy;
    }
    if (hop.sums) core_per_byte_[static_cast<size_t>(hop.dst)] += share * links_.inverse_bandwidth[links_.reduction_of(hop.to)];
  }

  void add_load(uint32_t direction, double share) {
    if (load_[direction] == 0) touched_.push_back(direction);
    load_[direction] += share;
  }
  SparseLoads take_loads() {
    SparseLoads out;
    for (uint32_t direction : touched_) {
      out.emplace_back(direction, load_[direction]);
      load_[direction] = 0;
    }
    touched_.clear();
    return out;
  }
  double busiest_total() {
    for (const auto& loads : loads_)
      for (const auto& [direction, load] : loads) add_load(direction, load);
    double busiest = 0;
    for (const auto& [direction, load] : take_loads()) busiest = std::max(busiest, load * links_.inverse_bandwidth[direction]);
    return busiest;
  }

  // Seconds per message byte of each hop of base steps first..last (in that order) under the
  // loads of all of them: the busiest link direction on its path, and its receiver's
  // reductions where it sums.
  const std::vector<double>& window_paces(size_t first, size_t last) {
    const auto key = std::make_pair(first, last);
    if (auto found = paces_.find(key); found != paces_.end()) return found->second;
    for (size_t s = first; s <= last; ++s)
      for (const auto& [direction, load] : loads_[s]) add_load(direction, load);
    std::vector<double> paces;
    for (size_t s = first; s <= last; ++s)
      for (const Hop& hop : steps_[s]) {
        double busiest = 0;
        NodeId a = hop.from, b = hop.to;
        while (a != b) {
          uint32_t direction;
          if (links_.depth[a] >= links_.depth[b]) {
            direction = 2 * static_cast<uint32_t>(a);
            a = links_.parent[a];
          } else {
            direction = 2 * static_cast<uint32_t>(b) + 1;
            b = links_.parent[b];
          }
          busiest = std::max(busiest, load_[direction] * links_.inverse_bandwidth[direction]);
        }
        if (hop.sums) {
          const uint32_t direction = 2 * nodes_ + static_cast<uint32_t>(hop.to);
          busiest = std::max(busiest, load_[direction] * links_.inverse_bandwidth[direction]);
        }
        paces.push_back(busiest);
      }
    take_loads();
    return paces_.emplace(key, std::move(paces)).first->second;
  }

  const Topology& topo_;
  const ir::Schedule& base_;
  LinkTable links_;  // inverse_bandwidth by direction: 2n up, 2n + 1 down, 2N + n reductions
  CostParams params_;
  int learners_;
  std::vector<double> load_;
  std::vector<uint32_t> touched_;
  uint32_t nodes_;
  std::vector<std::vector<Hop>> steps_;  // by base step (the first lowered_ of them lowered)
  std::vector<SparseLoads> loads_;       // by base step lowered
  size_t lowered_ = 0;
  std::vector<codegen::Hop> lowered_hops_;  // one op's, while lowering
  double slowest_hop_ = 0;
  uint64_t walked_ = 0;  // link directions walked while lowering, not yet counted as work
  // Seconds per message byte of each rank's core: its copies inside its machine and its
  // reductions (charge_cores), over every step lowered; empty until a hop is lowered.
  std::vector<double> core_per_byte_;
  std::map<std::pair<size_t, size_t>, std::vector<double>> paces_;
};

}  // namespace

ScheduleCost critical_path_cost(const Topology& topo, const ir::Schedule& base, uint32_t slices,
                                const CostParams& params) {
  return critical_path_cost(topo, base, slices, params, params.slice_progress);
}

ScheduleCost critical_path_cost(const Topology& topo, const ir::Schedule& base, uint32_t slices,
                                const CostParams& params, SliceProgress progress) {
  ir::require_materialized(base, "critical_path_cost");
  uint64_t work = 0;
  return *CriticalPath(topo, base, params).cost(slices, progress, std::numeric_limits<uint64_t>::max(), work);
}

ScheduleCost critical_path_cost(const Topology& topo, const ir::Schedule& schedule, const CostParams& params) {
  // A compact pipeline's steps and units are its base's.
  uint64_t work = 0;
  return *CriticalPath(topo, schedule, params)
              .cost(std::max<uint32_t>(schedule.slices, 1), params.slice_progress, std::numeric_limits<uint64_t>::max(), work);
}

std::optional<ScheduleCost> critical_path_cost_within(const Topology& topo, const ir::Schedule& base, uint32_t slices,
                                                      const CostParams& params, uint64_t budget, uint64_t& work) {
  ir::require_materialized(base, "critical_path_cost");
  return CriticalPath(topo, base, params).cost(slices, params.slice_progress, budget, work);
}

CriticalPathCounts critical_path_counts(const ir::Schedule& base, int learners) {
  CriticalPathCounts counts;
  std::vector<uint32_t> touched_in(static_cast<size_t>(std::max(learners, 0)), 0);  // step + 1
  uint32_t stamp = 0;
  const auto touch = [&](int32_t rank) {
    if (rank < 0 || rank >= learners) return;  // (the pricer names it)
    if (touched_in[static_cast<size_t>(rank)] != stamp) {
      touched_in[static_cast<size_t>(rank)] = stamp;
      ++counts.ranks_touched;
    }
  };
  for (const auto& step : base.steps) {
    ++stamp;
    const uint64_t before = counts.ranks_touched;
    for (const auto& op : step.ops) {
      if (op.end == op.begin) continue;
      const uint64_t hops = codegen::hop_count(op);
      if (hops == 0) continue;
      counts.hops += hops;
      touch(op.root);
      for (const int32_t member : op.group) touch(member);
    }
    counts.last_step_ranks_touched = counts.ranks_touched - before;
  }
  return counts;
}

uint64_t critical_path_least_work(const CriticalPathCounts& counts, uint32_t slices, const CostParams& params) {
  // Every hop, each slice, raises its receiver's and its sender's envelope (cost, raise: each
  // at least one line into at least one, two units).
  uint64_t least = 4 * counts.hops * slices;
  // Per slice a key is a rank's slice, and every rank a base step touches raises its own once
  // for its overheads, each slice; but the last pipeline step's come after the last budget
  // check. Per rank a key is a rank, raised once per pipeline step whatever base steps the
  // window holds: not counted.
  if (params.hop_overhead > 0 && params.slice_progress == SliceProgress::PerSlice)
    least += 2 * (counts.ranks_touched * slices - counts.last_step_ranks_touched);
  return least;
}


}  // namespace flexplan
