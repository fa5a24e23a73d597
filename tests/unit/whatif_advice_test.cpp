// The upgrade advice a designer acts on: single links beside classes, ranked by time saved or
// by time saved per cost (prices from a JSON file), a sequence of steps each applied on top of
// the last; and the report's round axis ticks.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "planner/plan_price.hpp"
#include "whatif/analysis.hpp"
#include "whatif/editable_tree.hpp"
#include "whatif/svg_chart.hpp"
#include "whatif/upgrade_costs.hpp"
#include "whatif/variation.hpp"

namespace flexplan::whatif {
namespace {

// Two racks of machines; rack1's uplink is slow, so one link is the bottleneck.
constexpr const char* kCluster = R"({"name": "advice", "root": {"name": "core", "children": [
  {"name": "rack0", "link": {"bandwidth": "100 Gbit/s", "latency": "2 us"}, "children": [
    {"name": "m{i}", "count": 3, "link": {"bandwidth": "25 Gbit/s", "latency": "10 us"},
     "children": [{"name": "gpu{i}", "count": 2, "link": {"bandwidth": "12 GB/s", "latency": "5 us"}}]}]},
  {"name": "rack1", "link": {"bandwidth": "10 Gbit/s", "latency": "2 us"}, "children": [
    {"name": "m0", "link": {"bandwidth": "25 Gbit/s", "latency": "10 us"},
     "children": [{"name": "gpu{i}", "count": 2, "link": {"bandwidth": "12 GB/s", "latency": "5 us"}}]},
    {"name": "m1", "link": {"bandwidth": "25 Gbit/s", "latency": "10 us"},
     "children": [{"name": "gpu{i}", "count": 2, "link": {"bandwidth": "12 GB/s", "latency": "5 us"}}]}]}]}})";

Topology cluster() { return parse_topology(kCluster, "advice"); }

AnalysisOptions at_256m() {
  AnalysisOptions options;
  options.sizes = {1 << 28};
  return options;
}

TEST(WhatifAdvice, RanksSingleLinksAndClassesByTimeSaved) {
  Pricer pricer({}, {});
  const PointResult r = analyse_point(cluster(), pricer, at_256m());
  ASSERT_GE(r.upgrades.size(), 3u);
  bool single = false, whole_class = false;
  for (size_t k = 0; k < r.upgrades.size(); ++k) {
    const Upgrade& u = r.upgrades[k];
    single = single || u.links == 1;
    whole_class = whole_class || u.target == "machines";
    EXPECT_EQ(u.before, r.sizes[0].time) << u.target;
    if (k > 0) {
      EXPECT_GE(r.upgrades[k - 1].saved(), u.saved()) << u.target;
    }
  }
  EXPECT_TRUE(single);
  EXPECT_TRUE(whole_class);
  // The slow link alone buys more than any class: the advice names it.
  ASSERT_FALSE(r.steps.empty());
  EXPECT_EQ(r.steps[0].upgrade.target, "link:core/rack1");
  EXPECT_EQ(r.upgrades[0].target, "link:core/rack1");
}

TEST(WhatifAdvice, StepsApplyOnTopOfEachOther) {
  Pricer pricer({}, {});
  AnalysisOptions options = at_256m();
  options.upgrade_steps = 3;
  Topology topo = cluster();
  const PointResult r = analyse_point(topo, pricer, options);
  ASSERT_GE(r.steps.size(), 2u);
  double total = r.sizes[0].time;
  for (size_t k = 0; k < r.steps.size(); ++k) {
    const Upgrade& u = r.steps[k].upgrade;
    // Each step starts where the one before ended, and saves time.
    EXPECT_EQ(u.before, k == 0 ? r.sizes[0].time : r.steps[k - 1].upgrade.after) << k;
    EXPECT_LT(u.after, u.before) << k;
    EXPECT_DOUBLE_EQ(r.steps[k].cumulative_gain, 1 - u.after / total) << k;
  }
  // The last step's time is the plan's on the tree with every step applied, priced afresh.
  std::vector<std::string> texts;
  for (const auto& step : r.steps) texts.push_back(step.upgrade.target + ".bandwidth*=2");
  EditableTree tree = editable_copy(cluster());
  for (const auto& text : texts) apply_variation(parse_variation(text), 0, tree);
  PlanOptions plan;
  EXPECT_EQ(price_plan(to_topology(tree), plan).time(1 << 28), r.steps.back().upgrade.after);
  // The tree is handed back as it came.
  EXPECT_EQ(topo.hash(), cluster().hash());
}

TEST(WhatifAdvice, CostsRankByTimeSavedPerCost) {
  const UpgradeCosts costs = parse_upgrade_costs(
      R"({"unit": "USD", "prices": {"machines": 1000, "learners": 10, "switches": 100000,
          "link:core/rack1": 5000}})", "test.json");
  Topology topo = cluster();
  auto node = [&](const std::string& name) {
    for (NodeId n = 0; n < topo.num_nodes(); ++n)
      if (topo.full_name(n) == name) return n;
    throw std::logic_error(name);
  };
  EXPECT_EQ(costs.link_price(topo, node("core/rack1")), 5000.0);  // link: before its kind
  EXPECT_EQ(costs.link_price(topo, node("core/rack1/m1")), 1000.0);
  EXPECT_EQ(costs.link_price(topo, node("core/rack1/m0/gpu1")), 10.0);
  EXPECT_EQ(costs.link_price(topo, node("core/rack0")), 100000.0);

  Pricer pricer({}, {});
  AnalysisOptions options = at_256m();
  options.costs = &costs;
  const PointResult r = analyse_point(topo, pricer, options);
  ASSERT_GE(r.upgrades.size(), 2u);
  for (size_t k = 0; k < r.upgrades.size(); ++k) {
    ASSERT_TRUE(r.upgrades[k].cost.has_value()) << r.upgrades[k].target;
    if (k > 0) {
      EXPECT_GE(r.upgrades[k - 1].saved_per_cost(), r.upgrades[k].saved_per_cost());
    }
  }
  const Upgrade* rack1 = nullptr;
  for (const auto& u : r.upgrades)
    if (u.target == "link:core/rack1") rack1 = &u;
  ASSERT_NE(rack1, nullptr);
  EXPECT_EQ(*rack1->cost, 5000.0);
  ASSERT_FALSE(r.steps.empty());
  EXPECT_EQ(r.steps[0].upgrade.target, r.upgrades[0].target);
  ASSERT_TRUE(r.steps.back().cumulative_cost.has_value());
  double spent = 0;
  for (const auto& step : r.steps) spent += *step.upgrade.cost;
  EXPECT_DOUBLE_EQ(*r.steps.back().cumulative_cost, spent);
}

TEST(WhatifAdvice, CostFileErrorsNameTheKey) {
  const auto message = [](const std::string& text) {
    try {
      parse_upgrade_costs(text, "c.json");
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message(R"({"prices": {"racks": 5}})").find("unknown link class 'racks'"), std::string::npos);
  EXPECT_NE(message(R"({"prices": {"machines": -5}})").find("'machines' must be a positive number"), std::string::npos);
  EXPECT_NE(message(R"({"price": {}})").find("unknown field 'price'"), std::string::npos);
  EXPECT_NE(message("{").find("--costs c.json: not valid JSON"), std::string::npos);
  // A link no key names has no price: upgrades holding it are ranked after the priced ones.
  const UpgradeCosts only_machines = parse_upgrade_costs(R"({"prices": {"machines": 1}})", "m.json");
  const Topology topo = cluster();
  EXPECT_FALSE(only_machines.link_price(topo, topo.learner_node(0)).has_value());
}

TEST(WhatifChart, TicksAreRound) {
  const auto round = [](double v) {
    const double mantissa = v / std::pow(10.0, std::floor(std::log10(v) + 1e-12));
    return std::abs(mantissa - 1) < 1e-9 || std::abs(mantissa - 2) < 1e-9 || std::abs(mantissa - 5) < 1e-9;
  };
  for (const auto& [lo, hi] : std::vector<std::pair<double, double>>{{56.2, 1780}, {0.013, 0.9}, {3, 7}, {1e-4, 1e6}}) {
    const auto log_ticks = round_ticks(lo, hi, true);
    ASSERT_FALSE(log_ticks.empty());
    EXPECT_LE(log_ticks.front(), lo);
    EXPECT_GE(log_ticks.back(), hi);
    for (double t : log_ticks) EXPECT_TRUE(round(t)) << t;
    const auto linear = round_ticks(0, hi, false);
    EXPECT_GE(linear.size(), 3u);
    EXPECT_LE(linear.size(), 12u);
    EXPECT_GE(linear.back(), hi);
    EXPECT_TRUE(round(linear[1] - linear[0])) << linear[1] - linear[0];  // the step
  }
  EXPECT_EQ(tick_label(1000), "1000");
  EXPECT_EQ(tick_label(0.2), "0.2");
  EXPECT_EQ(tick_label(50), "50");
  EXPECT_EQ(tick_label(250), "250");          // not 2.5e+02
  EXPECT_EQ(tick_label(0.1 + 0.2), "0.3");    // a sum of steps prints as its tick
  EXPECT_EQ(tick_label(0.0005), "0.0005");
}

}  // namespace
}  // namespace flexplan::whatif
