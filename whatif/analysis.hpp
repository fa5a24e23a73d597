// One point of a what-if sweep, analysed: the chosen algorithm per size range, predicted time
// and bus bandwidth against the ring and the floor, the bottleneck links with their
// utilization, the upgrade advice, and the training step when a workload is given.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "topology/topology.hpp"
#include "whatif/pricer.hpp"
#include "whatif/upgrade_costs.hpp"
#include "whatif/workload.hpp"

namespace flexplan::whatif {

struct SizeRange {
  std::string algorithm;
  uint64_t min_bytes = 0;
  std::optional<uint64_t> max_bytes;  // none: unbounded
};

struct SizeResult {
  uint64_t bytes = 0;
  std::string algorithm;  // the cheapest
  double time = 0, busbw = 0;
  double ring_time = 0, ring_busbw = 0;
  double saving = 0;       // 1 - time / ring_time
  double floor_ratio = 0;  // time / floor (0 when there is no floor: one learner)
  std::vector<std::pair<std::string, double>> by_algorithm;  // every priced algorithm's time
};

struct LinkLoad {
  std::string link;       // full name of the node whose uplink it is
  std::string direction;  // the busier: "up" (toward the root), "down", or "both"
  double bandwidth = 0;   // bytes/s
  double bytes = 0;       // carried during one all-reduce at the reference size
  double utilization = 0; // busy time / the all-reduce's time
};

struct Upgrade {
  std::string target;  // "link:core/rack1", "machines", "learners", "under:core/rack0"
  size_t links = 0;    // how many links it raises
  double before = 0, after = 0;  // the objective (all-reduce or step time), seconds
  // With --costs: the sum of its links' prices; none without costs or where a link has no
  // price.
  std::optional<double> cost;
  double saved() const { return before - after; }
  double gain() const { return before > 0 ? 1 - after / before : 0; }
  // Seconds saved per unit of cost (0 without a cost).
  double saved_per_cost() const { return cost && *cost > 0 ? saved() / *cost : 0; }
};

// One step of the upgrade sequence: applied on top of the steps before it.
struct UpgradeStep {
  Upgrade upgrade;               // before: the time with the earlier steps applied
  double cumulative_gain = 0;    // 1 - after / the point's time without any upgrade
  std::optional<double> cumulative_cost;  // with --costs, where every step has a price
};

struct PointResult {
  int learners = 0;
  std::string topology_hash;
  // Planned from the plan of the tree it varies (analyse_point's `from`): the kept rows that
  // raced ("kept:switch-tree", "kept:chain-bw"); empty where planned afresh.
  std::vector<std::string> kept;
  std::vector<SizeRange> ranges;
  std::vector<SizeResult> sizes;
  uint64_t reference_bytes = 0;  // bottlenecks and upgrades are judged at this size
  std::string reference_algorithm;
  std::vector<LinkLoad> bottlenecks;  // busiest first
  // Every candidate of the first step, best first: by time saved, or with costs by time saved
  // per cost (those without a price last, by time saved).
  std::vector<Upgrade> upgrades;
  // The advice: each step the best candidate on the tree with the steps before it applied
  // (without costs, the fewest links among those saving at least 99% of the best saving);
  // ends where no candidate saves time.
  std::vector<UpgradeStep> steps;
  std::optional<StepPrediction> step;
};

struct AnalysisOptions {
  std::vector<uint64_t> sizes;      // all-reduce sizes to report
  uint64_t reference_bytes = 0;     // 0: the largest size
  const Workload* workload = nullptr;
  size_t bottleneck_count = 3;
  bool advise = true;               // price the upgrade candidates
  size_t single_link_candidates = 6;  // busiest links tried one by one, per step
  double upgrade_factor = 2;        // an upgrade multiplies its links' bandwidth by this
  size_t upgrade_steps = 3;         // length of the upgrade sequence, at most
  const UpgradeCosts* costs = nullptr;
};

// The point is planned from `from`, the schedules of the plan it varies (KeptSchedule: empty
// where it has other learners or is that plan's own tree), as `flexplan TOPOLOGY --from
// PLAN.bin` plans it; each upgrade candidate and step from the plan before it. The upgrade
// candidates are priced by changing the topology's links in place; they are put back before it
// returns (also on a throw).
PointResult analyse_point(Topology&, Pricer&, const AnalysisOptions&, const std::vector<KeptSchedule>& from = {});
// The same on a copy of the topology.
PointResult analyse_point(const Topology&, Pricer&, const AnalysisOptions&,
                          const std::vector<KeptSchedule>& from = {});

}  // namespace flexplan::whatif
