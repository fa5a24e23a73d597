// Planner quality on random asymmetric clusters (docs/planner-quality.md): for every tree of the
// two families of cluster_families.hpp, the plan's predicted time at 256 MiB over the floor,
// and at 8 B over ceil(log2 P) times the diameter latency; the geometric mean and the worst of
// each, with the ring beside it. The 256 MiB ratio is also given over the weaker floor whose
// branch term counts each group's own uplink (floor.hpp, per_byte_own_uplinks), the floor the
// first results were measured against.
//
//   flexplan_plan_quality [--trees N] [--seed S] [--family realistic|adversarial|both] [--verbose]
//                         [--dump DIR]
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "cluster_families.hpp"
#include "ratio_stats.hpp"
#include "planner/cost_model.hpp"
#include "planner/floor.hpp"
#include "planner/plan_builder.hpp"
#include "topology/topology_writer.hpp"

namespace {

using namespace flexplan;

using Stats = bench::RatioStats;

}  // namespace

int main(int argc, char** argv) {
  int trees = 60;
  uint64_t seed = 20261123;
  std::string family = "both";
  bool verbose = false;
  std::string dump;  // write every tree's JSON here
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--trees" && i + 1 < argc) trees = std::stoi(argv[++i]);
    else if (arg == "--seed" && i + 1 < argc) seed = std::stoull(argv[++i]);
    else if (arg == "--family" && i + 1 < argc) family = argv[++i];
    else if (arg == "--verbose") verbose = true;
    else if (arg == "--dump" && i + 1 < argc) dump = argv[++i];
    else {
      fmt::print(stderr, "usage: {} [--trees N] [--seed S] [--family realistic|adversarial|both] [--verbose]\n", argv[0]);
      return 2;
    }
  }
  constexpr double kLarge = 256.0 * (1 << 20), kSmall = 8;
  fmt::print("| family | trees | learners | plan/floor at 256 MiB: geomean | worst "
             "| over the own-uplink floor: geomean | worst | ring/floor geomean "
             "| plan at 8 B / (ceil(log2 P) x diameter): geomean | worst |\n");
  fmt::print("|---|---|---|---|---|---|---|---|---|---|\n");
  for (const std::string which : {"realistic", "adversarial"}) {
    if (family != "both" && family != which) continue;
    bench::ClusterFamilies families(seed);
    Stats large, large_own, ring_large, small;
    int min_p = 1 << 30, max_p = 0;
    for (int t = 0; t < trees; ++t) {
      const Topology topo = which == "realistic" ? families.realistic() : families.adversarial();
      const int p = topo.num_learners();
      if (!dump.empty()) {
        std::ofstream out(dump + "/" + topo.name() + ".json");
        out << topology_to_json(topo);
      }
      min_p = std::min(min_p, p);
      max_p = std::max(max_p, p);
      const auto report = build_plan_report(topo, PlanOptions{});
      const auto floor = cost_floor(topo);
      const double at_large = report.chosen(static_cast<uint64_t>(kLarge)).cost.at(kLarge);
      const double ring = ring_cost(topo).at(kLarge);
      const double at_small = report.chosen(static_cast<uint64_t>(kSmall)).cost.at(kSmall);
      const double rounds = std::ceil(std::log2(static_cast<double>(p)));
      large.add(at_large / floor.at(kLarge), topo.name());
      large_own.add(at_large / std::max(floor.per_byte_own_uplinks * kLarge, floor.latency), topo.name());
      ring_large.add(ring / floor.at(kLarge), topo.name());
      small.add(at_small / (rounds * floor.latency), topo.name());
      if (verbose)
        fmt::print(stderr, "{:<16} P {:>4}  256 MiB {:<16} {:.3f}  8 B {:<16} {:.3f}\n", topo.name(), p,
                   report.chosen(static_cast<uint64_t>(kLarge)).algorithm, at_large / floor.at(kLarge),
                   report.chosen(static_cast<uint64_t>(kSmall)).algorithm,
                   at_small / (rounds * floor.latency));
    }
    fmt::print("| {} | {} | {}-{} | {:.3f} | {:.3f} ({}) | {:.3f} | {:.3f} ({}) | {:.3f} | {:.3f} | {:.3f} ({}) |\n",
               which, trees, min_p, max_p, large.geomean(), large.worst, large.worst_tree,
               large_own.geomean(), large_own.worst, large_own.worst_tree, ring_large.geomean(),
               small.geomean(), small.worst, small.worst_tree);
  }
  return 0;
}
