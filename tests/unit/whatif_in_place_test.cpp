// What-if work done in place gives what building afresh gives: upgrade advice priced by changing
// a point's links in place (against a Topology built per candidate), and sweep points that vary
// only links (against a Topology built per point).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>
#include <utility>

#include "planner_test_trees.hpp"
#include "whatif/analysis.hpp"
#include "whatif/editable_tree.hpp"
#include "whatif/records.hpp"
#include "whatif/sweep.hpp"
#include "whatif/variation.hpp"
#include "whatif/workload.hpp"

namespace flexplan::whatif {
namespace {

void add_below(const Topology& topo, NodeId n, std::vector<NodeId>& out) {
  for (NodeId c : topo.children(n)) {
    out.push_back(c);
    add_below(topo, c, out);
  }
}

// The links an upgrade target names (docs/whatif.md, "Upgrade advice").
std::vector<NodeId> links_of(const Topology& topo, const std::string& target) {
  std::vector<NodeId> nodes;
  // "link:A + link:B": the links tied as the busiest, together.
  if (const size_t plus = target.find(" + "); plus != std::string::npos) {
    nodes = links_of(topo, target.substr(0, plus));
    for (NodeId n : links_of(topo, target.substr(plus + 3))) nodes.push_back(n);
    return nodes;
  }
  for (NodeId n = 1; n < topo.num_nodes(); ++n) {
    if ((target == "machines" && topo.is_machine(n)) ||
        (target == "learners" && topo.is_learner(n)) || target == "link:" + topo.full_name(n))
      nodes.push_back(n);
    if (target == "under:" + topo.full_name(n)) add_below(topo, n, nodes);
  }
  return nodes;
}

Topology built_with_doubled(const Topology& topo, const std::vector<NodeId>& nodes) {
  TopoGraph graph = topo.graph();
  for (NodeId n : nodes) {
    graph[n].link.bandwidth *= 2;
    for (auto [e, end] = boost::in_edges(n, graph); e != end; ++e) graph[*e].bandwidth *= 2;
  }
  return Topology(topo.name(), std::move(graph));
}

// The analysis' objective, from its documented rules: the plan's time, at the reference size
// or through the workload's step.
double objective(const PlanPrice& price, const Workload* workload, int learners, double reference) {
  const auto plan = [&](double bytes) { return price.time(static_cast<uint64_t>(std::llround(bytes))); };
  if (workload) return predict_step(*workload, learners, plan).step;
  return plan(reference);
}

TEST(WhatifInPlace, AdviceEqualsAdviceOnRebuiltTopologiesOnRandomTrees) {
  testing::RandomTrees trees(1312);
  const Workload resnet = builtin_workload("resnet50");
  size_t compared = 0;
  for (int t = 0; t < 24; ++t) {
    Topology topo = trees.next(t % 2 ? 40 : 12);
    const Topology untouched = topo;
    const Workload* workload = t % 3 == 0 ? &resnet : nullptr;
    AnalysisOptions options;
    options.sizes = {1 << 12, 1 << 26};
    options.workload = workload;
    Pricer pricer({}, {});
    const PointResult result = analyse_point(topo, pricer, options);
    // The topology is handed back as it came.
    EXPECT_EQ(topo.hash(), untouched.hash());
    EXPECT_EQ(topo.is_symmetric(), untouched.is_symmetric());
    for (NodeId n = 1; n < topo.num_nodes(); ++n)
      EXPECT_EQ(topo.uplink(n).bandwidth, untouched.uplink(n).bandwidth) << topo.full_name(n);
    ASSERT_FALSE(result.upgrades.empty()) << topo.name();

    Pricer point_pricer({}, {});
    const PlanPrice point_plan = point_pricer.price(untouched);
    const double before = objective(point_plan, workload, untouched.num_learners(),
                                    static_cast<double>(result.reference_bytes));
    std::set<std::string> targets;
    for (const Upgrade& upgrade : result.upgrades) {
      EXPECT_TRUE(targets.insert(upgrade.target).second) << upgrade.target;
      const auto nodes = links_of(topo, upgrade.target);
      EXPECT_EQ(upgrade.links, nodes.size()) << topo.name() << " " << upgrade.target;
      // A fresh pricer on a fresh topology, re-planned from the point's plan (as the advice
      // is): nothing else carried over from the point.
      Pricer fresh({}, {});
      const Topology rebuilt = built_with_doubled(untouched, nodes);
      const double after = objective(fresh.price(rebuilt, point_plan.kept), workload, rebuilt.num_learners(),
                                     static_cast<double>(result.reference_bytes));
      EXPECT_EQ(upgrade.before, before) << topo.name() << " " << upgrade.target;
      EXPECT_EQ(upgrade.after, after) << topo.name() << " " << upgrade.target;
      ++compared;
    }
  }
  EXPECT_GT(compared, 24u * 3);
}

TEST(WhatifInPlace, LinkOnlySweepEqualsTopologiesBuiltPerPoint) {
  const Topology base = load_topology(std::string(FLEXPLAN_SOURCE_DIR) + "/topologies/asym-3level-a.json");
  const auto axes = [] {
    return std::vector<Variation>{parse_variation("machines.bandwidth=10Gbit/s,40Gbit/s"),
                                  parse_variation("link:core/rack1.bandwidth*=0.5,1,3"),
                                  parse_variation("under:core/rack2.latency*=1,4")};
  };
  AnalysisOptions options;
  options.sizes = {1 << 14, 1 << 24};
  options.upgrade_steps = 1;  // the points' figures are what is compared; steps cost a race each
  // One worker: every point after the first gives the same Topology new figures.
  const Sweep sweep = run_sweep(base, "asym", axes(), options, SweepOptions{{}, {}, 1});
  ASSERT_EQ(sweep.points.size(), 12u);

  Sweep fresh = sweep;
  const std::vector<Variation> variations = axes();
  const EditableTree tree = editable_copy(base);
  // Every point is re-planned from the base's plan (machines at 10 or 40 Gbit/s: none is the
  // tree as given).
  const std::vector<KeptSchedule> kept = Pricer({}, {}).price(base).kept;
  for (size_t i = 0; i < fresh.points.size(); ++i) {
    const Topology topo = to_topology(vary(tree, variations, grid_point(variations, i)));
    Pricer pricer({}, {});
    ASSERT_TRUE(replans_from(base, topo)) << i;
    fresh.points[i].result = analyse_point(topo, pricer, options, kept);
  }
  EXPECT_EQ(sweep_json(sweep), sweep_json(fresh));
  // The points differ from each other: the figures did change in place.
  EXPECT_NE(sweep.points[0].result.topology_hash, sweep.points[11].result.topology_hash);
}

TEST(WhatifInPlace, CopyLinksChecksShapeAndFigures) {
  const Topology base = testing::machines({2, 3});
  EditableTree tree = editable_copy(base);
  Topology topo = to_topology(tree);
  tree.root.children[1].link.bandwidth = 7e9;
  copy_links(tree, topo);
  EXPECT_EQ(topo.hash(), to_topology(tree).hash());

  tree.root.children[1].link.bandwidth = 0;
  try {
    copy_links(tree, topo);
    ADD_FAILURE() << "a zero bandwidth was taken";
  } catch (const TopologyError& e) {
    EXPECT_EQ(e.where(), topo.full_name(topo.children(0)[1]));
  }
  EXPECT_EQ(topo.uplink(topo.children(0)[1]).bandwidth, 7e9);  // unchanged

  tree.root.children[1].link.bandwidth = 7e9;
  tree.root.children[1].children.pop_back();
  EXPECT_THROW(copy_links(tree, topo), std::logic_error);
}

}  // namespace
}  // namespace flexplan::whatif
