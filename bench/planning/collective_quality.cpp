// Plan quality of the other collectives on random asymmetric clusters (docs/planner-quality.md):
// for every tree of the two families of cluster_families.hpp, the written plan's predicted time
// for all-gather, reduce-scatter and broadcast (root 0) at 256 MiB over the collective's floor,
// and at 8 B over ceil(log2 P) times the diameter latency (the goal's reference; a broadcast's
// own latency floor, the farthest learner from the root, is at most that); at 64 KiB and 1 MiB
// over n / w + D (w: the collective's bandwidth floor per byte, D: the diameter latency; issue
// 42's reference for all-reduce at those sizes); beside it the all-gather of the
// depth-first ring, and the all-reduce of the whole output that stands in for an all-gather
// today (the PyTorch backend's), each over the written all-gather.
//
//   flexplan_collective_quality [--trees N] [--seed S] [--family realistic|adversarial|both]
//                               [--verbose]
#include <cmath>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "cluster_families.hpp"
#include "ratio_stats.hpp"
#include "planner/collective_planner.hpp"
#include "planner/floor.hpp"
#include "planner/plan_builder.hpp"

namespace {

using namespace flexplan;

using Stats = bench::RatioStats;

}  // namespace

int main(int argc, char** argv) {
  int trees = 60;
  uint64_t seed = 20261128;
  std::string family = "both";
  bool verbose = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--trees" && i + 1 < argc) trees = std::stoi(argv[++i]);
    else if (arg == "--seed" && i + 1 < argc) seed = std::stoull(argv[++i]);
    else if (arg == "--family" && i + 1 < argc) family = argv[++i];
    else if (arg == "--verbose") verbose = true;
    else {
      fmt::print(stderr, "usage: {} [--trees N] [--seed S] [--family realistic|adversarial|both] [--verbose]\n", argv[0]);
      return 2;
    }
  }
  constexpr double kLarge = 256.0 * (1 << 20), kSmall = 8, kMiddle[] = {65536.0, 1048576.0};
  const ir::Collective kCollectives[] = {ir::Collective::AllGather, ir::Collective::ReduceScatter,
                                         ir::Collective::Broadcast};
  fmt::print("| family | collective | trees | learners | plan/floor at 256 MiB: geomean | worst "
             "| plan at 8 B / (ceil(log2 P) x diameter latency): geomean | worst "
             "| 64 KiB / (n/w + D): geomean (worst) | 1 MiB / (n/w + D): geomean (worst) "
             "| ring / plan at 256 MiB | all-reduce as all-gather / plan at 256 MiB |\n");
  fmt::print("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const std::string which : {"realistic", "adversarial"}) {
    if (family != "both" && family != which) continue;
    for (const ir::Collective collective : kCollectives) {
      bench::ClusterFamilies families(seed);  // the same trees for every collective
      Stats large, small, ring, all_reduce, middle[2];
      int min_p = 1 << 30, max_p = 0;
      for (int t = 0; t < trees; ++t) {
        const Topology topo = which == "realistic" ? families.realistic() : families.adversarial();
        const int p = topo.num_learners();
        min_p = std::min(min_p, p);
        max_p = std::max(max_p, p);
        const CollectivePlan plan = plan_collective(topo, collective, 0, {}, CostParams{});
        const auto& big = plan.chosen(static_cast<uint64_t>(kLarge));
        const auto& tiny = plan.chosen(static_cast<uint64_t>(kSmall));
        const double at_large = big.cost.at(kLarge), at_small = tiny.cost.at(kSmall);
        const double rounds = std::ceil(std::log2(static_cast<double>(p)));
        const double diameter = cost_floor(topo).latency;
        large.add(at_large / plan.floor.at(kLarge), topo.name());
        small.add(at_small / (rounds * diameter), topo.name());
        for (size_t m = 0; m < 2; ++m) {
          const double bytes = kMiddle[m];
          middle[m].add(plan.chosen(static_cast<uint64_t>(bytes)).cost.at(bytes) /
                            (plan.floor.per_byte * bytes + diameter),
                        topo.name());
        }
        if (collective == ir::Collective::AllGather) {
          for (const CollectiveCandidate& c : plan.candidates)
            if (c.algorithm == "ring" && c.left_out_because.empty())
              ring.add(c.cost.at(kLarge) / at_large, topo.name());
          const PlanReport reduce = build_plan_report(topo, PlanOptions{});
          all_reduce.add(reduce.chosen(static_cast<uint64_t>(kLarge)).cost.at(kLarge) / at_large,
                         topo.name());
        }
        if (verbose)
          fmt::print(stderr, "{:<16} {:<15} P {:>4}  256 MiB {:<14} {:.3f}  8 B {:<14} {:.3f}\n",
                     topo.name(), ir::to_string(collective), p, big.algorithm,
                     at_large / plan.floor.at(kLarge), tiny.algorithm,
                     at_small / (rounds * diameter));
      }
      const auto beside = [](const Stats& s) {
        return s.n ? fmt::format("{:.2f} (worst {:.2f})", s.geomean(), s.worst) : std::string("-");
      };
      const auto with_worst = [](const Stats& s) {
        return fmt::format("{:.3f} ({:.3f}, {})", s.geomean(), s.worst, s.worst_tree);
      };
      fmt::print("| {} | {} | {} | {}-{} | {:.3f} | {:.3f} ({}) | {:.3f} | {:.3f} ({}) | {} | {} | {} | {} |\n",
                 which, ir::to_string(collective), trees, min_p, max_p, large.geomean(), large.worst,
                 large.worst_tree, small.geomean(), small.worst, small.worst_tree, with_worst(middle[0]),
                 with_worst(middle[1]), beside(ring), beside(all_reduce));
    }
  }
  return 0;
}
