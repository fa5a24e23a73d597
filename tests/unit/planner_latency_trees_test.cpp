// The latency rows (planner/latency_trees.cpp): their schedules compute the all-reduce on random
// trees (the verifier and an independent interpreter), the direct exchange costs the diameter
// latency, a star's root pays one hop overhead per member, the centre tree's root is the centre,
// and the planner takes them for small messages only where they price cheapest. The switch trees
// (planner/switch_tree.cpp), rooted by price or by the shape, compute the all-reduce, are rooted
// at the centre, and the plan with them is never dearer than without them.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include <fmt/core.h>

#include "ir/verify.hpp"
#include "planner/algorithm_table.hpp"
#include "planner/cost_model.hpp"
#include "planner/critical_path.hpp"
#include "planner/floor.hpp"
#include "planner/latency_trees.hpp"
#include "planner/plan_builder.hpp"
#include "planner/switch_tree.hpp"
#include "planner_test_trees.hpp"

namespace flexplan {
namespace {

using testing::machines;

constexpr const char* kRows[] = {"direct", "leader-direct", "centre-tree", "double-tree"};

TEST(LatencyTrees, EveryRowComputesTheAllReduceOnRandomTrees) {
  testing::RandomTrees trees(4242);
  for (int i = 0; i < 60; ++i) {
    const auto topo = trees.next(30);
    for (const char* name : kRows)
      for (const std::string& variant : {std::string(name), std::string(name) + "@3"}) {
        if (variant == "direct@3") continue;
        const auto schedule = plan_algorithm(topo, variant);
        EXPECT_NO_THROW(ir::verify_schedule(schedule, topo.num_learners())) << variant << " on " << topo.name();
        EXPECT_EQ(testing::reference_allreduce_error(schedule, topo.num_learners()), "")
            << variant << " on " << topo.name();
      }
  }
}

TEST(LatencyTrees, DirectCostsTheDiameterPlusItsRootsOverheads) {
  testing::RandomTrees trees(7);
  for (int i = 0; i < 20; ++i) {
    const auto topo = trees.next(20);
    const auto direct = plan_direct(topo);
    EXPECT_NEAR(evaluate_schedule(topo, direct).latency(), cost_floor(topo).latency, 1e-12) << topo.name();
  }
  // Four learners 10 us apart: each root receives three hops one after another.
  const auto topo = machines({4});
  CostParams params;
  params.hop_overhead = 1e-6;
  EXPECT_NEAR(evaluate_schedule(topo, plan_direct(topo), params).latency(), 10e-6 + 3e-6, 1e-12);
  // A chain's hops pay one overhead each, as before.
  EXPECT_NEAR(evaluate_schedule(topo, plan_algorithm(topo, "ring"), params).latency(),
              evaluate_schedule(topo, plan_algorithm(topo, "ring")).latency() + 6e-6, 1e-12);
}

TEST(LatencyTrees, TheTreeIsRootedAtTheCentre) {
  // Two machines and one learner on the top switch: that learner is one link nearer the others.
  testing::TreeBuilder b;
  const Link near{10e9, 1e-6}, far{10e9, 30e-6};
  const NodeId left = b.add_switch(0, "left", far);
  const NodeId right = b.add_switch(0, "right", far);
  b.add_learner(left, "a", near);
  b.add_learner(right, "c", near);
  b.add_learner(0, "b", near);
  b.add_learner(left, "a2", near);
  const auto topo = b.build();
  const std::vector<int32_t> all{0, 1, 2, 3};
  const auto order = by_distance_from_centre(topo, all);
  EXPECT_EQ(topo.node(topo.learner_node(order.front())).name, "b");
  const auto tree = plan_centre_tree(topo);
  // The leaders' tree: its top reduce is rooted at the centre.
  bool rooted = false;
  for (const auto& step : tree.steps)
    for (const auto& op : step.ops)
      if (op.kind == ir::OpKind::Reduce && op.root == order.front() && op.group.size() == 3) rooted = true;
  EXPECT_TRUE(rooted);
}

TEST(LatencyTrees, LearnersOnASwitchOfMachinesLeadThemselves) {
  // A rack of one machine of two learners and two learners on the rack switch itself, each
  // behind its own 10 us link, and a second rack of one machine: the two on the switch are as
  // far from each other as from anyone, so leader-direct takes them into the leaders' exchange
  // instead of a star between them (a network round trip before it and after it).
  testing::TreeBuilder b;
  const Link nic{10e9, 10e-6}, pcie{20e9, 1e-6}, uplink{50e9, 2e-6};
  const NodeId rack0 = b.add_switch(0, "rack0", uplink);
  const NodeId rack1 = b.add_switch(0, "rack1", uplink);
  const NodeId m0 = b.add_switch(rack0, "m0", nic);
  b.add_learner(m0, "g0", pcie);
  b.add_learner(m0, "g1", pcie);
  b.add_learner(rack0, "h0", nic);
  b.add_learner(rack0, "h1", nic);
  const NodeId m1 = b.add_switch(rack1, "m1", nic);
  b.add_learner(m1, "g0", pcie);
  b.add_learner(m1, "g1", pcie);
  const auto topo = b.build();
  const auto schedule = plan_leader_direct(topo);
  ASSERT_EQ(schedule.steps.size(), 3u);
  EXPECT_EQ(schedule.steps[0].ops.size(), 2u);  // the two machines' stars
  EXPECT_EQ(schedule.steps[1].ops.size(), 4u);  // two machine leaders and the two on the switch
  for (const auto& op : schedule.steps[0].ops) EXPECT_EQ(op.group.size(), 2u);
  EXPECT_NO_THROW(ir::verify_schedule(schedule, topo.num_learners()));
  EXPECT_EQ(testing::reference_allreduce_error(schedule, topo.num_learners()), "");
  // Its price at 8 B: the leaders' diameter once, plus a machine hop each way and overheads.
  CostParams params;
  params.hop_overhead = 1e-6;
  const double price = critical_path_cost(topo, schedule, params).at(8);
  const double diameter = cost_floor(topo).latency;
  EXPECT_LT(price, diameter + 2 * (2e-6 + 1e-6) + 8e-6) << price << " against D " << diameter;
  const auto bound = latency_tree_size(topo, true, 0), size = measured_size(schedule);
  EXPECT_GE(bound.ops, size.ops);
  EXPECT_GE(bound.group_members, size.group_members);
}

TEST(LatencyTrees, ChosenForSmallMessagesOnlyWhereCheapest) {
  PlanOptions options;
  options.cost.hop_overhead = kMeasuredHopOverhead;
  const auto topo = machines({4, 4, 4, 4, 2, 2, 2, 2}, testing::kPcie, testing::kEthernet);
  const auto report = build_plan_report(topo, options);
  const auto small = report.chosen(8);
  const std::string name = small.algorithm;
  EXPECT_TRUE(name.find("direct") != std::string::npos || name.find("tree") != std::string::npos) << name;
  // Its price is the least of every candidate's at that size.
  for (const char* other : {"ring", "recursive-doubling", "rd-leader", "binomial-tree"})
    EXPECT_LE(small.cost.at(8), evaluate_schedule(topo, plan_algorithm(topo, other), options.cost).at(8) + 1e-12)
        << other;
  const std::string large = report.chosen(uint64_t{256} << 20).algorithm;
  EXPECT_EQ(large.find("direct"), std::string::npos) << large;
}


TEST(SwitchTree, ComputesTheAllReduceOnRandomTrees) {
  testing::RandomTrees trees(4243);
  for (int i = 0; i < 60; ++i) {
    const auto topo = trees.next(30);
    std::vector<std::pair<std::string, ir::Schedule>> schedules;
    for (const char* name : {"switch-tree", "switch-tree@3", "switch-double-tree", "switch-double-tree@2",
                             "switch-exchange", "switch-exchange@2", "switch-double-exch@3", "switch-binary-tree@2",
                             "switch-double-binary", "switch-chain-tree@3", "switch-lift-binary",
                             "switch-lift-double@2", "switch-triple-tree", "switch-fit-tree@2",
                             "switch-fit-triple@3"})
      schedules.emplace_back(name, plan_algorithm(topo, name));
    // Rooted by the shape alone (not raced: docs/whatif.md, "Roots that read no link").
    for (const bool exchange : {false, true})
      for (const uint32_t count : {1u, 2u})
        schedules.emplace_back(fmt::format("by shape, {} tree(s), exchange {}", count, exchange),
                               plan_switch_tree(topo, SwitchTreeShape{0, count, exchange, SwitchRoots::ByShape}));
    // The builder's other shapes: a binary heap per node, three trees.
    schedules.emplace_back("fan-out 2", plan_switch_tree(topo, SwitchTreeShape{2, 1}));
    schedules.emplace_back("fan-out 1, 3 trees, exchange at the centre", plan_switch_tree(topo, SwitchTreeShape{1, 3, true}));
    schedules.emplace_back("a star per node, lifted, exchange at the centre",
                           plan_switch_tree(topo, SwitchTreeShape{.exchange_at_centre = true, .lift_narrow = true}));
    for (const auto& [name, schedule] : schedules) {
      EXPECT_NO_THROW(ir::verify_schedule(schedule, topo.num_learners())) << name << " on " << topo.name();
      EXPECT_EQ(testing::reference_allreduce_error(schedule, topo.num_learners()), "") << name << " on " << topo.name();
    }
    schedules.emplace_back("four trees rotated, exchange at the centre",
                           plan_switch_tree(topo, SwitchTreeShape{.trees = 4, .exchange_at_centre = true, .rotate_sides = true}));
    // Shapes not raced (they won no worst case beside the raced ones, docs/planner-quality.md).
    schedules.emplace_back("binary heaps, three trees rotated",
                           plan_switch_tree(topo, SwitchTreeShape{.fanout = 2, .trees = 3, .rotate_sides = true}));
    schedules.emplace_back("fitted, two trees", plan_switch_tree(topo, SwitchTreeShape{.trees = 2, .fit_fanout = true}));
    schedules.emplace_back("fitted, lifted, exchange at the centre",
                           plan_switch_tree(topo, SwitchTreeShape{.exchange_at_centre = true, .lift_narrow = true, .fit_fanout = true}));
    // The size estimate bounds what is built.
    for (const bool exchange : {false, true})
      for (const SwitchRoots roots : {SwitchRoots::ByPrice, SwitchRoots::ByShape})
        for (const uint32_t count : {2u, 3u})
          for (const bool rotate : {false, true}) {
            const auto built =
                plan_switch_tree(topo, SwitchTreeShape{.trees = count, .exchange_at_centre = exchange, .roots = roots,
                                                       .rotate_sides = rotate});
            uint64_t ops = 0, members = 0;
            for (const auto& step : built.steps)
              for (const auto& op : step.ops) ++ops, members += op.group.size();
            EXPECT_LE(ops, switch_tree_size(topo, count, exchange, rotate).ops) << topo.name();
            EXPECT_LE(members, switch_tree_size(topo, count, exchange, rotate).group_members) << topo.name();
          }
  }
}

// The most links from `node` to a learner, by walking every path.
int eccentricity(const Topology& topo, NodeId node) {
  int far = 0;
  for (int r = 0; r < topo.num_learners(); ++r) {
    NodeId a = node, b = topo.learner_node(r);
    int links = 0;
    while (a != b) {
      NodeId& up = topo.depth(a) >= topo.depth(b) ? a : b;
      ++links;
      up = topo.parent(up);
    }
    far = std::max(far, links);
  }
  return far;
}

TEST(SwitchTree, LiftedMembersBehindNarrowLinksMeetOneLevelUp) {
  // The root (the centre) holds c and d on 10 GB/s links and a switch s on a 10 GB/s link; s
  // holds a and b on 1 GB/s links. The binary tree meets a and b at s: one of them takes the
  // other's sum in over its narrow link, sends the total up over it and takes the result in
  // again. Lifted, a and b meet c and d at the root, each of their links carrying its own sum
  // up and the result down: half the time per byte at 1 MiB.
  testing::TreeBuilder b;
  const Link fast{10e9, 1e-6}, narrow{1e9, 1e-6};
  const NodeId s = b.add_switch(b.root(), "s", fast);
  const int32_t a = 0, bb = 1, c = 2, d = 3;
  b.add_learner(s, "a", narrow, a);
  b.add_learner(s, "b", narrow, bb);
  b.add_learner(b.root(), "c", fast, c);
  b.add_learner(b.root(), "d", fast, d);
  const auto topo = b.build();
  const auto plain = plan_switch_tree(topo, SwitchTreeShape{.fanout = 2});
  const auto lifted = plan_switch_tree(topo, SwitchTreeShape{.fanout = 2, .lift_narrow = true});
  EXPECT_EQ(lifted.algorithm, "switch-lift-binary");
  const auto meets_a_and_b_alone = [&](const ir::Schedule& schedule) {
    for (const auto& step : schedule.steps)
      for (const auto& op : step.ops) {
        const auto& g = op.group;
        const auto has = [&](int32_t r) { return std::find(g.begin(), g.end(), r) != g.end(); };
        if (has(a) && has(bb) && !has(c) && !has(d)) return true;
      }
    return false;
  };
  EXPECT_TRUE(meets_a_and_b_alone(plain));
  EXPECT_FALSE(meets_a_and_b_alone(lifted));
  for (const auto* schedule : {&plain, &lifted}) {
    EXPECT_NO_THROW(ir::verify_schedule(*schedule, topo.num_learners())) << schedule->algorithm;
    EXPECT_EQ(testing::reference_allreduce_error(*schedule, topo.num_learners()), "") << schedule->algorithm;
  }
  const double n = 1 << 20;
  const double plain_time = critical_path_cost(topo, plain, 16, {}).at(n);
  const double lifted_time = critical_path_cost(topo, lifted, 16, {}).at(n);
  EXPECT_LT(lifted_time, 0.6 * plain_time) << plain_time << " s against " << lifted_time << " s";
}

TEST(SwitchTree, ThreeTreesTakeTurnsAtASwitchOfThreeEqualLinks) {
  // A switch s holds a and b, each on a 1 GB/s link, and hangs from the centre on a 1 GB/s
  // link; the centre holds c and d on fast links. Three sides of 1 GB/s meet at s: the floor is
  // 2(M - 1)/M = 4/3 of the message per side. One tree roots at a or b, whose link then carries
  // 2 messages each way; two trees put 1.5 on one of them. Three taking turns (a, b, the way up)
  // put 4/3 on each.
  testing::TreeBuilder b;
  const Link fast{100e9, 1e-6}, slow{1e9, 1e-6};
  const NodeId s = b.add_switch(b.root(), "s", slow);
  b.add_learner(s, "a", slow, 0);
  b.add_learner(s, "b", slow, 1);
  b.add_learner(b.root(), "c", fast, 2);
  b.add_learner(b.root(), "d", fast, 3);
  const auto topo = b.build();
  const auto one = plan_switch_tree(topo, SwitchTreeShape{});
  const auto two = plan_switch_tree(topo, SwitchTreeShape{.trees = 2});
  const auto three = plan_switch_tree(topo, SwitchTreeShape{.trees = 3, .rotate_sides = true});
  EXPECT_EQ(three.algorithm, "switch-triple-tree");
  for (const auto* schedule : {&one, &two, &three}) {
    EXPECT_NO_THROW(ir::verify_schedule(*schedule, topo.num_learners())) << schedule->algorithm;
    EXPECT_EQ(testing::reference_allreduce_error(*schedule, topo.num_learners()), "") << schedule->algorithm;
  }
  const double n = 64 << 20;
  const auto time = [&](const ir::Schedule& schedule) { return critical_path_cost(topo, schedule, 64, {}).at(n); };
  const double floor = cost_floor(topo).at(n);
  EXPECT_NEAR(floor, 4.0 / 3.0 * n / 1e9, 1e-9 * floor);
  EXPECT_GT(time(one), 1.45 * floor);  // 2 of the floor's 4/3
  EXPECT_GT(time(two), 1.1 * floor);   // 1.5 of 4/3
  EXPECT_LT(time(three), 1.05 * floor) << time(three) << " s against the floor's " << floor << " s";
}

TEST(SwitchTree, TurnsCountTheLinksNotTheRanks) {
  // Three switches of two learners each under the centre, every link 1 GB/s (the floor: 4/3 of
  // the message each way per link). Loads counted by rank (the first version) let two trees
  // root behind the same switch at the centre, whose uplink then carried 2.67 messages each way
  // (2.0x the floor). Counted by link, 1.75x: the turns are chosen tree by tree, bottom up, so
  // the first tree already puts 4/3 on its centre root's link; the double tree has 1.5x here,
  // and the race takes it.
  testing::TreeBuilder b;
  const Link link{1e9, 1e-6};
  for (int s = 0; s < 3; ++s) {
    const NodeId sw = b.add_switch(b.root(), fmt::format("s{}", s), link);
    b.add_learner(sw, fmt::format("a{}", s), link, 2 * s);
    b.add_learner(sw, fmt::format("b{}", s), link, 2 * s + 1);
  }
  const auto topo = b.build();
  const double n = 64 << 20;
  const auto time = [&](const SwitchTreeShape& shape) {
    const auto schedule = plan_switch_tree(topo, shape);
    EXPECT_EQ(testing::reference_allreduce_error(schedule, topo.num_learners()), "") << schedule.algorithm;
    return critical_path_cost(topo, schedule, 64, {}).at(n);
  };
  const double floor = cost_floor(topo).at(n);
  EXPECT_NEAR(floor, 4.0 / 3.0 * n / 1e9, 1e-9 * floor);
  const double three = time(SwitchTreeShape{.trees = 3, .rotate_sides = true});
  const double fitted = time(SwitchTreeShape{.trees = 3, .rotate_sides = true, .fit_fanout = true});
  EXPECT_LT(three, 1.8 * floor) << three << " s against the floor's " << floor;
  EXPECT_LT(fitted, 1.8 * floor) << fitted << " s against the floor's " << floor;
}

TEST(SwitchTree, AFittedTreeGivesTheWidestLinksTheMostMembers) {
  // Seven learners on one switch: one on 12.5 GB/s, two on 6.25 and four on 3.125. Every link
  // must carry the message each way, so the floor is n / 3.125 GB/s. A star loads its root's
  // link with six sums (6 / 12.5 = 0.48 s per GB) and a binary heap its 6.25 GB/s members with
  // two sums and their own (3 / 6.25); fitted, the 12.5 GB/s root takes four members and each
  // 6.25 GB/s member one, every link at 0.32.
  testing::TreeBuilder b;
  const double gb = 1e9;
  const std::vector<double> bandwidths{12.5 * gb, 6.25 * gb, 6.25 * gb, 3.125 * gb, 3.125 * gb, 3.125 * gb, 3.125 * gb};
  for (int32_t r = 0; r < static_cast<int32_t>(bandwidths.size()); ++r)
    b.add_learner(b.root(), fmt::format("l{}", r), Link{bandwidths[static_cast<size_t>(r)], 1e-6}, r);
  const auto topo = b.build();
  const auto star = plan_switch_tree(topo, SwitchTreeShape{});
  const auto binary = plan_switch_tree(topo, SwitchTreeShape{.fanout = 2});
  const auto fitted = plan_switch_tree(topo, SwitchTreeShape{.fit_fanout = true});
  EXPECT_EQ(fitted.algorithm, "switch-fit-tree");
  for (const auto* schedule : {&star, &binary, &fitted}) {
    EXPECT_NO_THROW(ir::verify_schedule(*schedule, topo.num_learners())) << schedule->algorithm;
    EXPECT_EQ(testing::reference_allreduce_error(*schedule, topo.num_learners()), "") << schedule->algorithm;
  }
  // The fitted tree's first reduce step: the 3.125 GB/s members' sums into the 6.25 ones.
  size_t into_root = 0;
  for (const auto& step : fitted.steps)
    for (const auto& op : step.ops)
      if (op.kind == ir::OpKind::Reduce && op.root == 0) into_root += op.group.size() - 1;
  EXPECT_EQ(into_root, 4u);
  const double n = 64 << 20;
  const auto time = [&](const ir::Schedule& schedule) { return critical_path_cost(topo, schedule, 64, {}).at(n); };
  const double floor = cost_floor(topo).at(n);
  EXPECT_NEAR(floor, n / (3.125 * gb), 1e-9 * floor);
  EXPECT_GT(time(star), 1.4 * floor);
  EXPECT_GT(time(binary), 1.4 * floor);
  EXPECT_LT(time(fitted), 1.05 * floor) << time(fitted) << " s against the floor's " << floor << " s";
}

TEST(SwitchTree, IsRootedAtTheCentre) {
  // The top switch's children: a rack with a learner near it and a branch three links down to
  // another, and a rack with one learner. The first rack is the centre (3 links from its
  // farthest learner, the top switch 4), and its near learner the tree's root.
  testing::TreeBuilder b;
  const Link near{10e9, 1e-6};
  const NodeId left = b.add_switch(0, "left", near);
  const NodeId right = b.add_switch(0, "right", near);
  const NodeId deep = b.add_switch(b.add_switch(left, "deep", near), "deeper", near);
  b.add_learner(deep, "far", near);
  b.add_learner(left, "close", near);
  b.add_learner(right, "other", near);
  const auto topo = b.build();
  EXPECT_EQ(topo.node(switch_tree_centre(topo)).name, "left");
  const auto tree = plan_switch_tree(topo, SwitchTreeShape{});
  ASSERT_FALSE(tree.steps.empty());
  // The last reduce step is the centre's star, rooted at the learner nearest the centre.
  const ir::Step* last = nullptr;
  for (const auto& step : tree.steps)
    if (step.phase == ir::Phase::Reduce) last = &step;
  ASSERT_NE(last, nullptr);
  ASSERT_EQ(last->ops.size(), 1u);
  EXPECT_EQ(topo.node(topo.learner_node(last->ops[0].root)).name, "close");
  EXPECT_EQ(last->ops[0].group.size(), 3u);
  // On random trees no node is nearer every learner than the centre.
  testing::RandomTrees trees(99);
  for (int i = 0; i < 20; ++i) {
    const auto random = trees.next(30);
    const int centre = eccentricity(random, switch_tree_centre(random));
    for (NodeId v = 0; v < random.num_nodes(); ++v) EXPECT_LE(centre, eccentricity(random, v)) << random.name() << " node " << v;
  }
}

TEST(SwitchTree, TheCentresExchangeNeverAddsLatency) {
  // Member j gets member i's sum over their own path, never longer than through the root the
  // tree would take it to: at zero bytes (no overheads) the exchange is never the slower.
  testing::RandomTrees trees(777);
  int shorter = 0;
  for (int i = 0; i < 30; ++i) {
    const auto topo = trees.next(30);
    for (const uint32_t count : {1u, 2u}) {
      const double tree = critical_path_cost(topo, plan_switch_tree(topo, SwitchTreeShape{0, count, false}), 1).at(0);
      const double exchange = critical_path_cost(topo, plan_switch_tree(topo, SwitchTreeShape{0, count, true}), 1).at(0);
      EXPECT_LE(exchange, tree * (1 + 1e-12)) << topo.name() << " trees " << count;
      if (exchange < tree * (1 - 1e-9)) ++shorter;
    }
  }
  EXPECT_GT(shorter, 10);
}

TEST(SwitchTree, ThePlanWithItIsNeverDearerAndItWinsSomewhere) {
  // The race takes the cheapest price: with the switch trees in it, the plan at every size is
  // no dearer than without them, and on these trees they win 64 KiB somewhere.
  testing::RandomTrees trees(515);
  PlanOptions with;
  with.cost.hop_overhead = kMeasuredHopOverhead;
  PlanOptions without = with;
  without.leave_out = {"switch-tree", "switch-double-tree", "switch-exchange", "switch-double-exch"};
  int won = 0;
  for (int i = 0; i < 8; ++i) {
    const auto topo = i % 2 == 0 ? trees.next(30) : machines({4, 4, 2, 8, 1, 3}, testing::kPcie, testing::kEthernet);
    const auto a = build_plan_report(topo, with), b = build_plan_report(topo, without);
    for (const double n : {8.0, 65536.0, 1048576.0, 268435456.0}) {
      const auto& chosen = a.chosen(static_cast<uint64_t>(n));
      EXPECT_LE(chosen.cost.at(n), b.chosen(static_cast<uint64_t>(n)).cost.at(n) * (1 + 1e-9)) << topo.name() << " " << n;
      if (n == 65536.0 && chosen.algorithm.rfind("switch-", 0) == 0) ++won;
    }
  }
  EXPECT_GT(won, 0);
}

}  // namespace
}  // namespace flexplan
