// What-if prices exactly the plan the plan command writes: on random trees, each varied at
// random (one link, a class, bandwidths and latencies), every time a what-if sweep reports
// equals the plan command's prediction for the varied topology (build_plan_report, winners
// built, re-planned from the base's plan as `flexplan VARIED.json --from BASE.bin` runs it);
// and no link made faster makes the predicted plan slower (docs/whatif.md, "Faster links,
// slower plans").
// Seeds held out from the other what-if tests; the second set was not looked at while the
// planner was changed for it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "ir/plan_binary.hpp"
#include "planner/plan_builder.hpp"
#include "planner/plan_price.hpp"
#include "planner/switch_tree.hpp"
#include "topology/topology_writer.hpp"
#include "planner_test_trees.hpp"
#include "whatif/analysis.hpp"
#include "whatif/editable_tree.hpp"
#include "whatif/sweep.hpp"
#include "whatif/variation.hpp"

namespace flexplan::whatif {
namespace {

constexpr uint64_t kSizes[] = {8, 1 << 12, 1 << 16, 1 << 20, 1 << 24, 1 << 28};

// The commands' cost model: the runtime's hop overhead and the star ops' incast loss, as
// measured (cli/cost_options.hpp), and the critical path's slice progress (the default unless
// a run asks for the other).
CostParams command_cost(SliceProgress progress = CostParams{}.slice_progress) {
  CostParams cost;
  cost.hop_overhead = kMeasuredHopOverhead;
  cost.incast_loss = kMeasuredIncastLoss;
  cost.slice_progress = progress;
  return cost;
}

// What a run prices with: the cost model, and rows the default race leaves out (to compare).
struct PropertyModel {
  CostParams cost = command_cost();
  std::vector<std::string> leave_out;
};

// The plan command's prediction: its report, winners built, compact pipelines; re-planned from
// an earlier plan's schedules where `from` has them (--from PLAN.bin).
PlanReport plan_command_report(const Topology& topo, const PropertyModel& model,
                               std::vector<KeptSchedule> from = {}) {
  PlanOptions options;
  options.compact_pipelines = true;
  options.cost = model.cost;
  options.leave_out = model.leave_out;
  options.kept = std::move(from);
  return build_plan_report(topo, options);
}

struct RandomVariation {
  std::string text;   // TARGET=1,VALUE: the base, then the varied point
  bool upgrade = false;  // the second point only makes links faster
};

// One axis of two points: the base (factor 1) and one change.
RandomVariation random_variation(const Topology& topo, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> node(1, topo.num_nodes() - 1);
  const double factors[] = {0.25, 0.5, 1.5, 2, 4, 10};
  const double factor = factors[std::uniform_int_distribution<int>(0, 5)(rng)];
  const int kind = std::uniform_int_distribution<int>(0, 9)(rng);
  std::string target;
  if (kind <= 4) target = "link:" + topo.full_name(node(rng));
  else if (kind == 5) target = "machines";
  else if (kind == 6) target = "learners";
  else if (kind == 7) target = "all";
  else {
    std::vector<NodeId> branches;  // every node with links below it, the root included
    for (NodeId n = 0; n < topo.num_nodes(); ++n)
      if (!topo.is_learner(n)) branches.push_back(n);
    target = "under:" + topo.full_name(branches[std::uniform_int_distribution<size_t>(0, branches.size() - 1)(rng)]);
  }
  const bool latency = kind == 9;
  RandomVariation v;
  v.text = fmt::format("{}.{}*=1,{}", target, latency ? "latency" : "bandwidth", factor);
  v.upgrade = latency ? factor < 1 : factor > 1;
  return v;
}

// Upgrades predicted slower than before, past the share LP's noise: it drops holdings under
// 1e-5 of the vector (bandwidth_shares.cpp), which moves a time by a few parts in a million.
constexpr double kNoise = 1e-5;

struct PropertyRun {
  size_t compared = 0, upgrades = 0;
  std::vector<std::string> slower;
  double worst = 1;
};

// `tree_count` random trees of `tree_seed`, ten random variations each (`variation_seed`).
PropertyRun run_property(uint64_t tree_seed, uint64_t variation_seed, int tree_count,
                         const PropertyModel& model = {}) {
  testing::RandomTrees trees(tree_seed);
  std::mt19937_64 rng(variation_seed);
  AnalysisOptions options;
  options.sizes.assign(std::begin(kSizes), std::end(kSizes));
  options.advise = false;  // the advice is priced by the same function; checked below
  PropertyRun run;
  for (int t = 0; t < tree_count; ++t) {
    const Topology base = trees.next(10);
    for (int v = 0; v < 10; ++v) {
      RandomVariation variation = random_variation(base, rng);
      Sweep sweep;
      try {
        sweep = run_sweep(base, base.name(), {parse_variation(variation.text)}, options, SweepOptions{{}, model.cost, 1, model.leave_out});
      } catch (const std::exception& e) {
        // "under:" of a learner's parent that is the root, and the like: not a variation.
        EXPECT_NE(dynamic_cast<const VariationError*>(&e), nullptr) << variation.text << ": " << e.what();
        continue;
      }
      EXPECT_EQ(sweep.points.size(), 2u);
      if (sweep.points.size() != 2) continue;
      const EditableTree varied_tree = vary(editable_copy(base), sweep.variations, grid_point(sweep.variations, 1));
      const Topology varied = to_topology(varied_tree);
      // As `flexplan VARIED.json --from BASE.bin` plans it, from the base plan as written (or
      // afresh where the variation changed the learners or nothing).
      // (Through plan.bin, as the command reads it.)
      const PlanReport base_report = plan_command_report(base, model);
      const std::string written = (std::filesystem::temp_directory_path() /
                                   fmt::format("flexplan-property-{}.bin", ::getpid())).string();
      ir::write_plan_file(written, base_report.plan);
      const std::vector<KeptSchedule> from = kept_schedules(ir::read_plan_file(written));
      std::filesystem::remove(written);
      EXPECT_EQ(from, base_report.kept) << base.name();
      const bool replanned = replans_from(base, varied);
      const PlanReport report = plan_command_report(varied, model, replanned ? from : std::vector<KeptSchedule>{});
      EXPECT_EQ(kept_schedules(report.plan), report.kept) << base.name() << " " << variation.text;
      const PointResult& before = sweep.points[0].result;
      const PointResult& after = sweep.points[1].result;
      // The tree as given is planned afresh, and so is a point with other learners (a re-planned
      // point races its kept rows unless every one is pruned as unable to win).
      EXPECT_TRUE(before.kept.empty()) << base.name() << " " << variation.text;
      if (!replanned) {
        EXPECT_TRUE(after.kept.empty()) << base.name() << " " << variation.text;
      }
      EXPECT_EQ(after.topology_hash, varied.hash_hex());
      for (size_t k = 0; k < std::size(kSizes); ++k) {
        const uint64_t bytes = kSizes[k];
        const Candidate& chosen = report.chosen(bytes);
        // Exactly: the same race, the same price.
        EXPECT_EQ(after.sizes[k].time, chosen.cost.at(static_cast<double>(bytes)))
            << base.name() << " " << variation.text << " at " << bytes;
        EXPECT_EQ(after.sizes[k].algorithm, chosen.algorithm) << base.name() << " " << variation.text;
        ++run.compared;
        if (!variation.upgrade) continue;
        ++run.upgrades;
        const double was = before.sizes[k].time, is = after.sizes[k].time;
        if (is <= was * (1 + kNoise)) continue;
        const std::string what = fmt::format("{} {} at {} B: {} -> {} s ({} -> {})", base.name(), variation.text,
                                             bytes, was, is, before.sizes[k].algorithm, after.sizes[k].algorithm);
        run.slower.push_back(what);
        // To look into a pair: the tree as topology JSON (named by its seed too: each seed
        // numbers its trees from 0), for `flexplan whatif TREE VARIATION`.
        if (const char* dump = std::getenv("FLEXPLAN_PROPERTY_DUMP")) {
          if (FILE* file = std::fopen(fmt::format("{}/{}-{}.json", dump, tree_seed, base.name()).c_str(), "w")) {
            std::fputs(topology_to_json(base).c_str(), file);
            std::fclose(file);
          }
        }
        run.worst = std::max(run.worst, is / was);
      }
    }
  }
  // Told here, not hidden.
  std::cout << run.slower.size() << " of " << run.upgrades << " (size, upgrade) pairs predicted slower, the worst by "
            << fmt::format("{:.2f}%", 100 * (run.worst - 1)) << "\n";
  for (const auto& line : run.slower) std::cout << "  " << line << "\n";
  return run;
}

// The trees the planner was changed against. Planned afresh, a faster link gave a plan predicted
// slower on 32 pairs (worst 19.7%) at first, and on 2 (worst 4.51%, switch trees whose root the
// faster link moved) after the fixes of docs/whatif.md, "Faster links, slower plans". Re-planned
// from the base's plan (its schedules raced again, KeptSchedule), on none: a schedule kept is
// priced no dearer on faster links, so the race's minimum cannot rise.
TEST(WhatifPlanProperty, WhatifTimesAreThePlanCommandsOnRandomVariations) {
  const PropertyRun run = run_property(60'417, 5'903, 50);
  EXPECT_GT(run.compared, 50u * 10 * std::size(kSizes) * 3 / 4);
  EXPECT_GT(run.upgrades, 1000u);
  EXPECT_EQ(run.slower.size(), 0u);
}

// Held out: seeds first run after the fixes above (2 slower pairs, worst 0.43%, planned afresh;
// none re-planned from the base's plan).
TEST(WhatifPlanProperty, NoUpgradePredictedSlowerOnHeldOutTrees) {
  const PropertyRun run = run_property(71'209, 8'861, 20);
  EXPECT_GT(run.upgrades, 400u);
  EXPECT_EQ(run.slower.size(), 0u);
}

// The switch trees rooted by the shape read no bandwidth: after any bandwidth change their
// schedules are the same, where the trees rooted by price do move (docs/whatif.md, "Roots that
// read no link, raced beside").
TEST(WhatifPlanProperty, SwitchTreesRootedByShapeIgnoreBandwidths) {
  testing::RandomTrees trees(90'417);
  std::mt19937_64 rng(3'301);
  int moved = 0, compared = 0;
  for (int i = 0; i < 30; ++i) {
    const Topology base = trees.next(16);
    const std::string targets[] = {"link:" + base.full_name(std::uniform_int_distribution<int>(1, base.num_nodes() - 1)(rng)),
                                   "machines", "learners", "all"};
    const double factors[] = {0.25, 1.5, 4, 10};
    const std::vector<Variation> variation{parse_variation(
        fmt::format("{}.bandwidth*=1,{}", targets[i % 4], factors[std::uniform_int_distribution<int>(0, 3)(rng)]))};
    Topology varied = base;
    try {
      varied = to_topology(vary(editable_copy(base), variation, grid_point(variation, 1)));
    } catch (const VariationError&) {
      continue;
    }
    for (const bool exchange : {false, true})
      for (const uint32_t count : {1u, 2u}) {
        const SwitchTreeShape by_shape{0, count, exchange, SwitchRoots::ByShape};
        EXPECT_EQ(plan_switch_tree(base, by_shape), plan_switch_tree(varied, by_shape)) << base.name() << " " << i;
        ++compared;
        const SwitchTreeShape by_price{0, count, exchange};
        moved += plan_switch_tree(base, by_price) != plan_switch_tree(varied, by_price);
      }
  }
  EXPECT_GT(compared, 60);
  EXPECT_GT(moved, 0);
}

// More seeds, and the per-slice pricing, on request (not in the default run: minutes each):
//   FLEXPLAN_PROPERTY_RUNS="424242:1717:30,90210:3141:30" (tree seed:variation seed:trees),
//   FLEXPLAN_PROPERTY_SLICE_PROGRESS=per-slice|per-rank, FLEXPLAN_PROPERTY_LEAVE_OUT=row,row
//   (and in any run FLEXPLAN_PROPERTY_DUMP=DIR writes each slower pair's tree to DIR)
//   flexplan_unit_tests --gtest_also_run_disabled_tests --gtest_filter='*DISABLED_SeedsFromEnvironment'
// Each run prints its slower pairs; the test asserts only that what-if and the plan command agree.
std::vector<std::string> comma_list(const char* text) {
  std::vector<std::string> items;
  std::string item;
  for (const char* c = text; c != nullptr && *c != '\0'; ++c) {
    if (*c != ',') item += *c;
    if (*c == ',' || c[1] == '\0') {
      if (!item.empty()) items.push_back(item);
      item.clear();
    }
  }
  return items;
}

TEST(WhatifPlanProperty, DISABLED_SeedsFromEnvironment) {
  PropertyModel model;
  if (const char* progress = std::getenv("FLEXPLAN_PROPERTY_SLICE_PROGRESS")) {
    const std::string name = progress;
    ASSERT_TRUE(name == "per-slice" || name == "per-rank") << "FLEXPLAN_PROPERTY_SLICE_PROGRESS: " << name;
    model.cost = command_cost(name == "per-slice" ? SliceProgress::PerSlice : SliceProgress::PerRank);
  }
  model.leave_out = comma_list(std::getenv("FLEXPLAN_PROPERTY_LEAVE_OUT"));
  const char* runs = std::getenv("FLEXPLAN_PROPERTY_RUNS");
  const auto specs = comma_list(runs != nullptr ? runs : "60417:5903:50,71209:8861:20,424242:1717:30,90210:3141:30");
  for (const auto& spec : specs) {
    uint64_t tree_seed = 0, variation_seed = 0;
    int trees = 0;
    ASSERT_EQ(std::sscanf(spec.c_str(), "%lu:%lu:%d", &tree_seed, &variation_seed, &trees), 3)
        << "FLEXPLAN_PROPERTY_RUNS: '" << spec << "' is not TREE_SEED:VARIATION_SEED:TREES";
    std::cout << "seeds " << spec << ":\n";
    run_property(tree_seed, variation_seed, trees, model);
  }
}

}  // namespace
}  // namespace flexplan::whatif
