// The cost model's options shared by the commands that plan or predict (plan, predict, whatif):
// --hop-overhead, --incast-loss, --reduce-bandwidth, --slice-progress and --host-cores, their help and their parsing
// into CostParams (the hop overhead and the reduction rate defaulting to the topology's).
#pragma once

#include <stdexcept>
#include <string>

#include <CLI/CLI.hpp>

#include "planner/cost_model.hpp"
#include "topology/topology.hpp"

namespace flexplan::cli {

struct CostOptions {
  // Empty: the topology's "hop_overhead" (flexplan probe measures it), else the runtime's
  // measured per-hop cost (planner/cost_model.hpp, kMeasuredHopOverhead).
  std::string hop_overhead;
  std::string reduce_bandwidth;  // empty: the topology's rate; "none": not modelled
  // Default: the star ops' measured loss to incast (planner/cost_model.hpp, kMeasuredIncastLoss).
  double incast_loss = kMeasuredIncastLoss;
  // Empty: the library's default (CostParams::slice_progress), so that the flag follows it.
  std::string slice_progress;
  int host_cores = 0;  // 0: each learner has cores of its own

  void add_to(CLI::App& app) {
    app.add_option("--hop-overhead", hop_overhead,
                   "software cost of one hop, added to every hop's latency (\"2 us\"; default: the "
                   "topology's \"hop_overhead\", as flexplan probe measures it, else the runtime's "
                   "figure measured on one host, " + format_latency(kMeasuredHopOverhead) + "; docs/cost-model.md)");
    app.add_option("--incast-loss", incast_loss,
                   "how much more a star op's flows load a link between machines than their "
                   "bytes where two or more of them share it (0.16: 16%; 0: the plain "
                   "alpha-beta model; default: measured on the emulated cluster, "
                   "docs/cost-model.md)")
        ->capture_default_str();
    app.add_option("--reduce-bandwidth", reduce_bandwidth,
                   "rate at which a learner sums a received range into its own (\"4 GB/s\", or "
                   "\"none\" not to model reductions; default: the topology's "
                   "\"reduce_bandwidth\", else none). Learners that reduce on the CPU over "
                   "shared memory: see docs/cost-model.md");
    app.add_option("--slice-progress", slice_progress,
                   "how a pipelined plan's critical path lets a rank's slices progress: \"rank\" "
                   "(a step waits for all of the rank's previous step: the runtime step by step, "
                   "FLEXPLAN_STEP_OVERLAP=0) or \"slice\" (only its own slice's: the runtime with "
                   "its steps overlapping); default: the library's, " +
                       std::string(CostParams{}.slice_progress == SliceProgress::PerSlice ? "slice" : "rank"));
    app.add_option("--host-cores", host_cores,
                   "the learners all run on one host of this many cores (one machine, or an "
                   "emulated cluster): a call then takes at least its hops' software cost (a hop "
                   "overhead each) over these cores; default 0, each learner has cores of its own "
                   "(docs/cost-model.md)")
        ->check(CLI::Range(0, 1 << 20));
  }

  // The topology's reduction rate and hop overhead, where the command line did not give them.
  void apply_topology(CostParams& params, const Topology& topo) const {
    if (reduce_bandwidth.empty()) params.reduce_bandwidth = topo.reduce_bandwidth();
    if (hop_overhead.empty() && topo.hop_overhead()) params.hop_overhead = *topo.hop_overhead();
  }

  // Where the hop overhead apply_topology left in the parameters came from, for the commands'
  // reports: "--hop-overhead", "the topology" or "the default".
  std::string hop_overhead_source(const Topology& topo) const {
    if (!hop_overhead.empty()) return "--hop-overhead";
    return topo.hop_overhead() ? "the topology" : "the default";
  }

  // Throws std::invalid_argument naming the option.
  CostParams parse() const {
    CostParams params;
    if (!(incast_loss >= 0 && incast_loss <= 10))
      throw std::invalid_argument(std::string("--incast-loss: ") + std::to_string(incast_loss) +
                                  " is not a loss from 0 to 10");
    params.incast_loss = incast_loss;
    params.hop_overhead = kMeasuredHopOverhead;  // apply_topology puts the topology's in its place
    if (!hop_overhead.empty()) {
      try {
        params.hop_overhead = parse_latency(hop_overhead);
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(std::string("--hop-overhead: ") + e.what());
      }
      if (params.hop_overhead > Topology::kMaxHopOverhead)
        throw std::invalid_argument("--hop-overhead: \"" + hop_overhead + "\" is above 1 s per hop, the most flexplan accepts");
    }
    if (!reduce_bandwidth.empty() && reduce_bandwidth != "none") {
      try {
        params.reduce_bandwidth = parse_bandwidth(reduce_bandwidth);
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(std::string("--reduce-bandwidth: ") + e.what());
      }
    }
    params.host_cores = host_cores;
    if (slice_progress == "rank")
      params.slice_progress = SliceProgress::PerRank;
    else if (slice_progress == "slice")
      params.slice_progress = SliceProgress::PerSlice;
    else if (!slice_progress.empty())
      throw std::invalid_argument("--slice-progress: \"" + slice_progress + "\" is not rank or slice");
    return params;
  }
};

}  // namespace flexplan::cli
