// Changing link figures in place (Topology::set_uplinks, undo): the result equals a topology
// built afresh with those figures (hash included, also when threads ask for it at once), bad
// changes change nothing, and undo restores exactly.
#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "planner_test_trees.hpp"
#include "topology/topology.hpp"

namespace flexplan {
namespace {

using Changes = std::vector<Topology::UplinkChange>;

// The topology built from scratch out of a copy of `topo`'s graph with `changes` applied.
Topology rebuilt(const Topology& topo, const Changes& changes) {
  TopoGraph graph = topo.graph();
  for (const auto& change : changes) {
    graph[change.node].link = change.link;
    for (auto [e, end] = boost::in_edges(change.node, graph); e != end; ++e) graph[*e] = change.link;
  }
  return Topology(topo.name(), std::move(graph));
}

void expect_same(const Topology& a, const Topology& b) {
  ASSERT_EQ(a.num_nodes(), b.num_nodes());
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_EQ(a.is_symmetric(), b.is_symmetric());
  for (NodeId n = 1; n < a.num_nodes(); ++n) {
    EXPECT_EQ(a.uplink(n).bandwidth, b.uplink(n).bandwidth) << a.full_name(n);
    EXPECT_EQ(a.uplink(n).latency, b.uplink(n).latency) << a.full_name(n);
    // The edge keeps the node's figures (a copy of the graph builds the same topology).
    for (auto [e, end] = boost::in_edges(n, a.graph()); e != end; ++e) {
      EXPECT_EQ(a.graph()[*e].bandwidth, a.uplink(n).bandwidth) << a.full_name(n);
      EXPECT_EQ(a.graph()[*e].latency, a.uplink(n).latency) << a.full_name(n);
    }
  }
  EXPECT_EQ(Topology(a.name(), a.graph()).hash(), a.hash());
}

TEST(TopologySetUplinks, EqualsABuiltTopologyOnRandomTrees) {
  testing::RandomTrees trees(2024);
  std::mt19937_64 rng(7);
  for (int t = 0; t < 60; ++t) {
    Topology topo = trees.next();
    const Topology original = topo;
    std::uniform_int_distribution<NodeId> node(1, topo.num_nodes() - 1);
    std::uniform_real_distribution<double> factor(0.25, 4);
    Changes changes;
    for (int c = std::uniform_int_distribution<int>(1, 6)(rng); c > 0; --c) {
      const NodeId n = node(rng);
      const Link now = topo.uplink(n);
      changes.push_back({n, {now.bandwidth * factor(rng), c % 2 ? now.latency * factor(rng) : 0}});
    }
    const auto undo = topo.set_uplinks(changes);
    expect_same(topo, rebuilt(original, changes));
    topo.undo(undo);
    expect_same(topo, original);
  }
}

TEST(TopologySetUplinks, ThreadsAskingForAStaleHashAllGetIt) {
  testing::RandomTrees trees(99);
  Topology topo = trees.next(40);
  const Changes changes{{1, {3e9, 2e-6}}};
  const Topology expected = rebuilt(topo, changes);
  topo.set_uplinks(changes);  // the hash is computed when next asked for
  const Topology& shared = topo;
  std::vector<uint64_t> seen(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < seen.size(); ++i)
    threads.emplace_back([&, i] { seen[i] = shared.hash(); });
  for (auto& thread : threads) thread.join();
  for (uint64_t hash : seen) EXPECT_EQ(hash, expected.hash());
}

TEST(TopologySetUplinks, TracksSymmetry) {
  Topology topo = testing::symmetric({2, 3}, {testing::kEthernet, testing::kPcie});
  ASSERT_TRUE(topo.is_symmetric());
  const uint64_t hash = topo.hash();
  const auto undo = topo.set_uplink(1, {2 * testing::kEthernet.bandwidth, testing::kEthernet.latency});
  EXPECT_FALSE(topo.is_symmetric());
  EXPECT_NE(topo.hash(), hash);
  topo.undo(undo);
  EXPECT_TRUE(topo.is_symmetric());
  EXPECT_EQ(topo.hash(), hash);
}

TEST(TopologySetUplinks, BadChangesAreNamedAndChangeNothing) {
  Topology topo = testing::machines({2, 3});
  const Topology original = topo;
  const NodeId learner = topo.learner_node(0);
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<std::pair<Changes, std::string>> bad{
      {{{0, testing::kPcie}}, "the root has no uplink"},
      {{{topo.num_nodes(), testing::kPcie}}, "no such node"},
      {{{-1, testing::kPcie}}, "no such node"},
      {{{1, {2e9, 1e-6}}, {learner, {0, 1e-6}}}, "bandwidth must be positive"},
      {{{1, {2e9, 1e-6}}, {learner, {inf, 1e-6}}}, "bandwidth must be positive"},
      {{{1, {2e9, 1e-6}}, {learner, {1e9, -1e-6}}}, "latency must be non-negative"},
  };
  for (const auto& [changes, message] : bad) {
    try {
      topo.set_uplinks(changes);
      ADD_FAILURE() << "accepted: " << message;
    } catch (const TopologyError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
    expect_same(topo, original);
  }
  // The error names the node by its full name.
  try {
    topo.set_uplink(learner, {-1, 0});
  } catch (const TopologyError& e) {
    EXPECT_EQ(e.where(), topo.full_name(learner));
  }
}

TEST(TopologySetUplinks, UndoesLastFirstAndRefusesAnyOtherUndo) {
  Topology topo = testing::machines({2, 3});
  const Topology original = topo;
  const auto first = topo.set_uplink(1, {3e9, 1e-6});
  const Topology after_first = topo;
  const auto second = topo.set_uplink(1, {4e9, 2e-6});
  EXPECT_THROW(topo.undo(first), std::logic_error);  // not the latest
  topo.undo(second);
  expect_same(topo, after_first);
  EXPECT_THROW(topo.undo(second), std::logic_error);  // already undone
  topo.undo(first);
  expect_same(topo, original);
  // A copy is another topology: the latest change of one does not undo the other's.
  Topology copy = topo;
  const auto on_topo = topo.set_uplink(2, {5e9, 0});
  copy.set_uplink(2, {6e9, 0});
  EXPECT_THROW(copy.undo(on_topo), std::logic_error);
}

}  // namespace
}  // namespace flexplan
