// Trees for the planner and cost-model tests, built in code (no JSON): a small builder, the
// shapes the tests name, a seeded generator of random asymmetric trees, and an independent
// reference interpreter that runs a schedule on numbers.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <utility>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "ir/plan.hpp"
#include "planner/algorithm_table.hpp"
#include "topology/topology.hpp"

namespace flexplan::testing {

// Every algorithm of the table that suits the tree, and for each that pipelines its variants
// with these slice counts ("flexreduce@3").
inline std::vector<std::string> algorithms_for(const Topology& topo,
                                               std::initializer_list<uint32_t> slices) {
  std::vector<std::string> names;
  for (const AlgorithmRow& row : algorithm_table()) {
    if (row.unsuitable && !row.unsuitable(topo).empty()) continue;
    names.emplace_back(row.name);
    if (row.pipelines)
      for (uint32_t s : slices) names.push_back(std::string(row.name) + "@" + std::to_string(s));
  }
  return names;
}

// Adds a vertex, then sets its properties: GCC 12 with the sanitizers warns about Boost's
// property-taking add_vertex (a false -Wuninitialized inside boost::optional).
inline NodeId add_node(TopoGraph& graph, TopoNodeProps props) {
  const auto v = boost::add_vertex(graph);
  graph[v] = std::move(props);
  return static_cast<NodeId>(v);
}

class TreeBuilder {
 public:
  explicit TreeBuilder(std::string name = "test") : name_(std::move(name)) {
    TopoNodeProps root;
    root.name = "root";
    add_node(graph_, root);
  }
  NodeId root() const { return 0; }
  NodeId add_switch(NodeId parent, const std::string& name, Link link) {
    return add(parent, name, link, -1);
  }
  // Ranks default to the order learners are added.
  NodeId add_learner(NodeId parent, const std::string& name, Link link, int rank = -1) {
    return add(parent, name, link, rank < 0 ? learners_ : rank);
  }
  int learners() const { return learners_; }
  Topology build() const { return Topology(name_, graph_); }

 private:
  NodeId add(NodeId parent, const std::string& name, Link link, int rank) {
    TopoNodeProps props;
    props.name = name;
    props.link = link;
    props.rank = rank;
    const NodeId v = add_node(graph_, props);
    boost::add_edge(parent, v, link, graph_);
    if (rank >= 0) ++learners_;
    return v;
  }

  std::string name_;
  TopoGraph graph_;
  int learners_ = 0;
};

inline const Link kPcie{12e9, 5e-6};
inline const Link kEthernet{1.25e9, 50e-6};

// Machines under one switch, with the given learners each: {2, 3} is the paper's Fig. 2.
inline Topology machines(const std::vector<int>& learners_per_machine, Link learner = kPcie,
                         Link machine = kEthernet) {
  TreeBuilder b("machines");
  for (size_t m = 0; m < learners_per_machine.size(); ++m) {
    const NodeId node = b.add_switch(b.root(), "m" + std::to_string(m), machine);
    for (int g = 0; g < learners_per_machine[m]; ++g)
      b.add_learner(node, "gpu" + std::to_string(g), learner);
  }
  return b.build();
}

// A symmetric tree: fan_outs from the root down, links[d] the uplink of nodes at depth d + 1.
inline Topology symmetric(const std::vector<int>& fan_outs, const std::vector<Link>& links) {
  TreeBuilder b("symmetric");
  std::vector<NodeId> frontier{b.root()};
  for (size_t depth = 0; depth < fan_outs.size(); ++depth) {
    std::vector<NodeId> next;
    const bool leaves = depth + 1 == fan_outs.size();
    for (NodeId parent : frontier)
      for (int i = 0; i < fan_outs[depth]; ++i) {
        const std::string name = (leaves ? "gpu" : "n") + std::to_string(i);
        next.push_back(leaves ? b.add_learner(parent, name, links[depth])
                              : b.add_switch(parent, name, links[depth]));
      }
    frontier = std::move(next);
  }
  return b.build();
}

// Random asymmetric trees: 1-4 branch levels, uneven fan-outs (including branches with a single
// learner and learners directly under upper switches), heterogeneous links, ranks permuted.
class RandomTrees {
 public:
  explicit RandomTrees(uint64_t seed) : rng_(seed) {}

  Topology next(int max_learners = 40) {
    std::uniform_int_distribution<int> levels_dist(1, 4);
    const int levels = levels_dist(rng_);
    // First lay out the shape, then number the learners with a random permutation.
    TopoGraph graph;
    TopoNodeProps root;
    root.name = "root";
    add_node(graph, root);
    std::vector<NodeId> learners;
    grow(graph, 0, levels, max_learners, learners);
    // An all-reduce needs two learners.
    for (int extra = 0; learners.size() < 2; ++extra)
      learners.push_back(add(graph, 0, "extra" + std::to_string(extra), random_link(1), true));
    std::vector<int> ranks(learners.size());
    std::iota(ranks.begin(), ranks.end(), 0);
    std::shuffle(ranks.begin(), ranks.end(), rng_);
    for (size_t i = 0; i < learners.size(); ++i) graph[learners[i]].rank = ranks[i];
    return Topology("random" + std::to_string(count_++), graph);
  }

 private:
  // Children of `parent`, which sits `height` levels above the learners at most.
  void grow(TopoGraph& graph, NodeId parent, int height, int budget,
            std::vector<NodeId>& learners) {
    std::uniform_int_distribution<int> fan(1, height == 1 ? 5 : 4);
    const int children = fan(rng_);
    for (int i = 0; i < children && static_cast<int>(learners.size()) < budget; ++i) {
      const bool learner = height == 1 || coin(0.15);
      const NodeId child = add(graph, parent, (learner ? "g" : "s") + std::to_string(i),
                               random_link(height), learner);
      if (learner)
        learners.push_back(child);
      else
        grow(graph, child, height - 1, budget, learners);
    }
    if (learners.empty() || boost::out_degree(parent, graph) == 0)
      learners.push_back(add(graph, parent, "g_last", random_link(height), true));
  }

  NodeId add(TopoGraph& graph, NodeId parent, const std::string& name, Link link, bool learner) {
    TopoNodeProps props;
    props.name = name;
    props.link = link;
    props.rank = learner ? 0 : -1;
    const NodeId v = add_node(graph, props);
    boost::add_edge(parent, v, link, graph);
    return v;
  }

  Link random_link(int height) {
    std::uniform_real_distribution<double> bw(0.5, 20.0), lat(1.0, 60.0);
    return Link{bw(rng_) * 1e9 / height, lat(rng_) * 1e-6};
  }
  bool coin(double p) { return std::bernoulli_distribution(p)(rng_); }

  std::mt19937_64 rng_;
  int count_ = 0;
};

// Each pipelining algorithm's base on `count` random trees of the seed, with 2, 3 and m + 1
// slices (m: the base's steps): visit(topo, base, slices, tree index).
template <class Visit>
void for_each_random_pipeline(uint64_t seed, int count, int max_learners, Visit&& visit) {
  RandomTrees trees(seed);
  for (int i = 0; i < count; ++i) {
    const Topology topo = trees.next(max_learners);
    for (const AlgorithmRow& row : algorithm_table()) {
      if (!row.pipelines || (row.unsuitable && !row.unsuitable(topo).empty())) continue;
      const ir::Schedule base = row.build(topo);
      for (uint32_t slices : {2u, 3u, static_cast<uint32_t>(base.steps.size()) + 1})
        visit(topo, base, slices, i);
    }
  }
}

// Runs an all-reduce schedule on numbers, independently of the IR verifier: every rank starts
// with a random 64-bit weight on every unit; a reduce sets the root's range to the sum of its
// group's values as the step began, a broadcast copies the root's range to the group. The result
// is right when every rank ends with the sum of all weights everywhere. Ranges are tracked as
// segments between op boundaries, so huge unit counts cost nothing. Returns "" or what is wrong.
inline std::string reference_allreduce_error(const ir::Schedule& schedule, int world_size,
                                             uint64_t seed = 7) {
  std::vector<uint64_t> cuts{0, schedule.units};
  for (const auto& step : schedule.steps)
    for (const auto& op : step.ops) {
      if (op.begin >= op.end || op.end > schedule.units) return "bad range";
      cuts.push_back(op.begin);
      cuts.push_back(op.end);
    }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  const size_t segments = cuts.size() - 1;
  const auto segment_of = [&](uint64_t unit) {
    return static_cast<size_t>(std::lower_bound(cuts.begin(), cuts.end(), unit) - cuts.begin());
  };

  std::mt19937_64 rng(seed);
  std::vector<std::vector<uint64_t>> value(world_size, std::vector<uint64_t>(segments));
  uint64_t total = 0;
  for (auto& rank : value) {
    const uint64_t weight = rng();
    total += weight;
    std::fill(rank.begin(), rank.end(), weight);
  }
  // written[rank][segment] = 1 + the last step that wrote it, to catch two writes in one step.
  std::vector<std::vector<uint32_t>> written(world_size, std::vector<uint32_t>(segments, 0));
  struct Write {
    int rank;
    size_t segment;
    uint64_t value;
  };
  for (size_t s = 0; s < schedule.steps.size(); ++s) {
    // Ops read the values as the step began: collect the writes, apply them after the step.
    std::vector<Write> writes;
    for (size_t o = 0; o < schedule.steps[s].ops.size(); ++o) {
      const auto& op = schedule.steps[s].ops[o];
      const auto in_world = [&](int r) { return r >= 0 && r < world_size; };
      if (!in_world(op.root) || !std::all_of(op.group.begin(), op.group.end(), in_world))
        return "rank out of range";
      for (size_t seg = segment_of(op.begin); seg < segment_of(op.end); ++seg) {
        const size_t first_write = writes.size();
        if (op.kind == ir::OpKind::Reduce) {
          uint64_t sum = 0;
          for (int member : op.group) sum += value[member][seg];
          writes.push_back({op.root, seg, sum});
        } else {
          for (int member : op.group)
            if (member != op.root) writes.push_back({member, seg, value[op.root][seg]});
        }
        for (size_t w = first_write; w < writes.size(); ++w)
          if (std::exchange(written[writes[w].rank][seg], s + 1) == s + 1)
            return "step " + std::to_string(s) + ": two ops write rank " +
                   std::to_string(writes[w].rank);
      }
    }
    for (const auto& w : writes) value[w.rank][w.segment] = w.value;
  }
  for (int r = 0; r < world_size; ++r)
    for (size_t seg = 0; seg < segments; ++seg)
      if (value[r][seg] != total)
        return "rank " + std::to_string(r) + " units [" + std::to_string(cuts[seg]) + ", " +
               std::to_string(cuts[seg + 1]) + ") end without the full sum";
  return "";
}

}  // namespace flexplan::testing
