// The tree queries (parent, children, learners under a node, LCA, routes, levels, symmetry),
// checked on hand-written trees and against brute force on random ones, and the checks the
// constructor makes on graphs built by hand.
#include <algorithm>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "topology/topology.hpp"

namespace flexplan {
namespace {

// The example of docs/topology.md (two machines of 2 and 3 GPUs), as bundled.
Topology example() {
  return load_topology(FLEXPLAN_SOURCE_DIR "/topologies/two-machines-2+3.json");
}

// Builds a TopoGraph by hand; node ids are in order of add().
struct HandBuilt {
  TopoGraph graph;
  NodeId add(const std::string& name, NodeId parent = -1, int rank = -1,
             Link link = {1e9, 1e-6}) {
    const NodeId id = static_cast<NodeId>(boost::add_vertex(graph));
    graph[id].name = name;
    graph[id].rank = rank;
    if (parent >= 0) boost::add_edge(parent, id, link, graph);
    return id;
  }
};

std::vector<int> as_vector(std::span<const int> s) { return {s.begin(), s.end()}; }

NodeId child_named(const Topology& t, NodeId parent, const std::string& name) {
  for (NodeId c : t.children(parent))
    if (t.node(c).name == name) return c;
  ADD_FAILURE() << "no child " << name;
  return -1;
}

TEST(TopologyQueries, ParentsChildrenAndDepths) {
  const Topology t = example();
  const NodeId m0 = child_named(t, t.root(), "m0");
  const NodeId m1 = child_named(t, t.root(), "m1");
  EXPECT_EQ(t.parent(t.root()), -1);
  EXPECT_EQ(t.degree(t.root()), 2);
  EXPECT_EQ(t.parent(m1), t.root());
  EXPECT_EQ(t.degree(m1), 3);
  EXPECT_EQ(t.parent(t.learner_node(3)), m1);
  EXPECT_EQ(t.parent(t.learner_node(1)), m0);
  EXPECT_TRUE(t.is_learner(t.learner_node(0)));
  EXPECT_FALSE(t.is_learner(m0));
  EXPECT_EQ(t.depth(t.root()), 0);
  EXPECT_EQ(t.depth(m0), 1);
  EXPECT_EQ(t.depth(t.learner_node(4)), 2);
  EXPECT_EQ(t.rank_of(t.learner_node(4)), 4);
}

TEST(TopologyQueries, LearnersUnderANode) {
  const Topology t = example();
  EXPECT_EQ(as_vector(t.learners_under(t.root())), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(as_vector(t.learners_under(child_named(t, t.root(), "m1"))),
            (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(as_vector(t.learners_under(t.learner_node(3))), (std::vector<int>{3}));
}

TEST(TopologyQueries, LowestCommonAncestorAndRoutes) {
  const Topology t = example();
  const NodeId m0 = child_named(t, t.root(), "m0");
  const NodeId m1 = child_named(t, t.root(), "m1");
  EXPECT_EQ(t.lca(0, 1), m0);
  EXPECT_EQ(t.lca(4, 2), m1);
  EXPECT_EQ(t.lca(1, 3), t.root());
  EXPECT_EQ(t.lca(2, 2), t.learner_node(2));

  const Topology::Route r = t.route(1, 3);
  EXPECT_EQ(r.up, (std::vector<NodeId>{t.learner_node(1), m0}));
  EXPECT_EQ(r.down, (std::vector<NodeId>{m1, t.learner_node(3)}));
  EXPECT_DOUBLE_EQ(t.path_latency(1, 3), 5e-6 + 50e-6 + 50e-6 + 5e-6);
  EXPECT_DOUBLE_EQ(t.path_latency(0, 1), 10e-6);

  const Topology::Route self = t.route(2, 2);
  EXPECT_TRUE(self.up.empty());
  EXPECT_TRUE(self.down.empty());
  EXPECT_EQ(t.path_latency(2, 2), 0.0);

  EXPECT_THROW(t.lca(0, 5), std::out_of_range);
  EXPECT_THROW(t.route(-1, 0), std::out_of_range);
}

TEST(TopologyQueries, LevelsCountUpFromTheBottomBranches) {
  // root -> rack -> machine -> 2 learners, and root -> lone machine -> 1 learner: the lone
  // machine is on level 0 at depth 1, the rack on level 1 at depth 1.
  HandBuilt b;
  const NodeId root = b.add("root");
  const NodeId rack = b.add("rack", root);
  const NodeId machine = b.add("machine", rack);
  b.add("g0", machine, 0);
  b.add("g1", machine, 1);
  const NodeId lone = b.add("lone", root);
  b.add("g0", lone, 2);
  const Topology t("levels", b.graph);
  EXPECT_EQ(t.num_levels(), 3);
  EXPECT_EQ(t.level(t.learner_node(0)), -1);
  EXPECT_EQ(t.level(machine), 0);
  EXPECT_EQ(t.level(lone), 0);
  EXPECT_EQ(t.level(rack), 1);
  EXPECT_EQ(t.level(root), 2);
  const auto bottom = t.nodes_at_level(0);
  EXPECT_EQ(std::vector<NodeId>(bottom.begin(), bottom.end()), (std::vector<NodeId>{machine, lone}));
  EXPECT_EQ(t.nodes_at_level(2).size(), 1u);
  EXPECT_EQ(t.full_name(t.learner_node(2)), "root/lone/g0");
  EXPECT_FALSE(t.is_symmetric());
}

TEST(TopologyQueries, SymmetryNeedsEqualFanOutsAndLinksPerDepth) {
  auto two_by_two = [](Link second_machine_uplink, int second_machine_gpus) {
    HandBuilt b;
    const NodeId root = b.add("s");
    const NodeId m0 = b.add("m0", root, -1, {1e9, 1e-5});
    const NodeId m1 = b.add("m1", root, -1, second_machine_uplink);
    int rank = 0;
    for (int g = 0; g < 2; ++g) b.add("g" + std::to_string(g), m0, rank++);
    for (int g = 0; g < second_machine_gpus; ++g) b.add("g" + std::to_string(g), m1, rank++);
    return Topology("t", b.graph);
  };
  EXPECT_TRUE(two_by_two({1e9, 1e-5}, 2).is_symmetric());
  EXPECT_FALSE(two_by_two({1e9, 1e-5}, 3).is_symmetric()) << "fan-out differs";
  EXPECT_FALSE(two_by_two({2e9, 1e-5}, 2).is_symmetric()) << "bandwidth differs";
  EXPECT_FALSE(two_by_two({1e9, 2e-5}, 2).is_symmetric()) << "latency differs";
  EXPECT_FALSE(example().is_symmetric());
}

// Random trees with node ids in no particular order and ranks shuffled, against brute force.
TEST(TopologyQueries, RandomTreesAgreeWithBruteForce) {
  std::mt19937 rng(12345);
  for (int trial = 0; trial < 40; ++trial) {
    const int nodes = std::uniform_int_distribution<int>(4, 120)(rng);
    // Node i > 0 hangs below a random earlier node; then ids are shuffled (keeping 0 as root).
    std::vector<int> parent(nodes, -1);
    for (int i = 1; i < nodes; ++i) parent[i] = std::uniform_int_distribution<int>(0, i - 1)(rng);
    std::vector<int> id(nodes);
    std::iota(id.begin(), id.end(), 0);
    std::shuffle(id.begin() + 1, id.end(), rng);
    std::vector<int> fanout(nodes, 0);
    for (int i = 1; i < nodes; ++i) ++fanout[parent[i]];
    std::vector<int> leaves;
    for (int i = 0; i < nodes; ++i)
      if (fanout[i] == 0) leaves.push_back(i);
    if (leaves.size() < 2) continue;
    std::vector<int> rank_of_leaf(leaves.size());
    std::iota(rank_of_leaf.begin(), rank_of_leaf.end(), 0);
    std::shuffle(rank_of_leaf.begin(), rank_of_leaf.end(), rng);

    TopoGraph g(nodes);
    std::vector<int> rank(nodes, -1);
    for (size_t k = 0; k < leaves.size(); ++k) rank[leaves[k]] = rank_of_leaf[k];
    for (int i = 0; i < nodes; ++i) {
      g[id[i]].name = "n" + std::to_string(i);
      g[id[i]].rank = rank[i];
    }
    for (int i = 1; i < nodes; ++i)
      boost::add_edge(id[parent[i]], id[i], Link{1e9 * (1 + i % 3), 1e-6 * i}, g);
    const Topology t("random", g);

    auto ancestors = [&](int i) {  // i, parent(i), ..., 0 in generator numbering
      std::vector<int> chain{i};
      while (parent[chain.back()] >= 0) chain.push_back(parent[chain.back()]);
      return chain;
    };
    auto height = [&](auto&& self, int i) -> int {
      int h = -1;
      for (int c = 1; c < nodes; ++c)
        if (parent[c] == i) h = std::max(h, self(self, c) + 1);
      return h;
    };
    ASSERT_EQ(t.num_learners(), static_cast<int>(leaves.size()));
    for (int i = 0; i < nodes; ++i) {
      EXPECT_EQ(t.parent(id[i]), i == 0 ? -1 : id[parent[i]]);
      EXPECT_EQ(t.depth(id[i]), static_cast<int>(ancestors(i).size()) - 1);
      EXPECT_EQ(t.level(id[i]), height(height, i));
      std::multiset<int> under;
      for (size_t k = 0; k < leaves.size(); ++k) {
        const auto chain = ancestors(leaves[k]);
        if (std::find(chain.begin(), chain.end(), i) != chain.end()) under.insert(rank_of_leaf[k]);
      }
      const auto got = t.learners_under(id[i]);
      EXPECT_EQ(std::multiset<int>(got.begin(), got.end()), under);
    }
    for (size_t a = 0; a < leaves.size(); ++a) {
      for (size_t b = 0; b < leaves.size(); ++b) {
        const auto chain_a = ancestors(leaves[a]);
        const auto chain_b = ancestors(leaves[b]);
        int meet = leaves[b];
        size_t down_length = 0;
        while (std::find(chain_a.begin(), chain_a.end(), meet) == chain_a.end())
          meet = parent[meet], ++down_length;
        const int ra = rank_of_leaf[a], rb = rank_of_leaf[b];
        EXPECT_EQ(t.lca(ra, rb), id[meet]);
        const auto r = t.route(ra, rb);
        const size_t up_length =
            std::find(chain_a.begin(), chain_a.end(), meet) - chain_a.begin();
        ASSERT_EQ(r.up.size(), up_length);
        ASSERT_EQ(r.down.size(), down_length);
        for (size_t k = 0; k < up_length; ++k) EXPECT_EQ(r.up[k], id[chain_a[k]]);
        for (size_t k = 0; k < down_length; ++k)
          EXPECT_EQ(r.down[down_length - 1 - k], id[chain_b[k]]);
      }
    }
  }
}

// A graph that breaks a tree invariant, and a phrase the error must contain.
void expect_rejected(const TopoGraph& g, const std::string& phrase) {
  try {
    Topology t("bad", g);
    ADD_FAILURE() << "accepted; expected: " << phrase;
  } catch (const TopologyError& e) {
    EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
  }
}

TEST(TopologyQueries, ConstructorRejectsGraphsThatAreNoTree) {
  expect_rejected(TopoGraph(), "no nodes");
  {
    HandBuilt b;  // two parents
    const NodeId root = b.add("s");
    const NodeId m0 = b.add("m0", root);
    const NodeId m1 = b.add("m1", root);
    const NodeId g = b.add("g", m0, 0);
    b.add("h", m1, 1);
    boost::add_edge(m1, g, Link{1e9, 0}, b.graph);
    expect_rejected(b.graph, "exactly one parent, this one has 2");
  }
  {
    HandBuilt b;  // a cycle beside the tree
    const NodeId root = b.add("s");
    b.add("a", root, 0);
    b.add("b", root, 1);
    const NodeId x = b.add("x");
    const NodeId y = b.add("y", x);
    boost::add_edge(y, x, Link{1e9, 0}, b.graph);
    expect_rejected(b.graph, "cycle");
  }
  {
    HandBuilt b;  // root with a parent
    const NodeId root = b.add("s");
    const NodeId a = b.add("a", root, 0);
    b.add("b", root, 1);
    boost::add_edge(a, root, Link{1e9, 0}, b.graph);
    expect_rejected(b.graph, "root (node 0) cannot have a parent");
  }
}

TEST(TopologyQueries, ConstructorRejectsBadNamesLinksAndRanks) {
  auto two_learners = [](int rank_a, int rank_b, Link link_b = {1e9, 0},
                         const std::string& name_b = "b") {
    HandBuilt b;
    const NodeId root = b.add("s");
    b.add("a", root, rank_a);
    b.add(name_b, root, rank_b, link_b);
    return b.graph;
  };
  expect_rejected(two_learners(0, 0), "rank 0 is already taken by s/a");
  expect_rejected(two_learners(0, 2), "rank 2 is outside 0..1");
  expect_rejected(two_learners(0, -1), "rank -1 is outside 0..1");
  expect_rejected(two_learners(0, 1, {0, 0}), "bandwidth must be positive");
  expect_rejected(two_learners(0, 1, {1e9, -1}), "latency must be non-negative");
  expect_rejected(two_learners(0, 1, {1e9, 0}, "a"), "two children of \"s\" are named \"a\"");
  expect_rejected(two_learners(0, 1, {1e9, 0}, "x/y"), "cannot contain '/'");
  expect_rejected(two_learners(0, 1, {1e9, 0}, ""), "needs a name");
  {
    HandBuilt b;
    const NodeId root = b.add("s");
    b.add("only", root, 0);
    expect_rejected(b.graph, "at least 2 learners, the tree has 1");
  }
  {
    HandBuilt b;
    const NodeId root = b.add("s", -1, 0);
    b.add("a", root, 0);
    b.add("b", root, 1);
    expect_rejected(b.graph, "only learners have a rank");
  }
  {
    HandBuilt b;  // the edge and the node copy of a link disagree
    const NodeId root = b.add("s");
    b.add("a", root, 0);
    const NodeId c = b.add("b", root, 1, {1e9, 0});
    b.graph[c].link = {2e9, 0};
    expect_rejected(b.graph, "disagree");
  }
}

TEST(TopologyQueries, LinkGivenOnlyOnTheNodeIsTaken) {
  HandBuilt b;
  const NodeId root = b.add("s");
  const NodeId a = b.add("a", root, 0, {});
  const NodeId c = b.add("b", root, 1, {});
  b.graph[a].link = {3e9, 1e-6};
  b.graph[c].link = {3e9, 1e-6};
  const Topology t("node-links", b.graph);
  EXPECT_EQ(t.uplink(a).bandwidth, 3e9);
  EXPECT_EQ(t.graph()[boost::edge(root, a, t.graph()).first].bandwidth, 3e9);
}

}  // namespace
}  // namespace flexplan
