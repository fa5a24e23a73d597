// Seeded generators of the two families of random asymmetric clusters the planner's quality
// goals are measured on (docs/planner-quality.md):
//   - realistic: one to four racks; machines of 1 to 8 GPUs on NVLink (150 or 300 GB/s) or
//     PCIe (12, 16 or 25 GB/s); machine NICs of 10, 25, 50, 100 or 200 Gbit/s; rack uplinks of
//     40 to 400 Gbit/s, so racks are often oversubscribed;
//   - adversarial: 2 to 4 levels of uneven fan-out (1 to 5, some branches cut short), a random
//     bandwidth from 0.1 to 50 GB/s on every link, slow links low in the tree as often as high.
// Latencies: 1-3 us inside a machine, 5-15 us for a NIC, 2-10 us for a rack uplink, 1-40 us on
// adversarial links.
#pragma once

#include <random>
#include <string>
#include <utility>

#include "topology/topology.hpp"

namespace flexplan::bench {

class ClusterFamilies {
 public:
  explicit ClusterFamilies(uint64_t seed) : rng_(seed) {}

  Topology realistic() {
    start("realistic");
    const int racks = pick({1, 1, 2, 2, 3, 4});
    for (int r = 0; r < racks; ++r) {
      NodeId rack = 0;
      if (racks > 1)
        rack = add(0, "rack" + std::to_string(r),
                   {gbit(pick({40, 100, 200, 400})), micro(uniform(2, 10))});
      const int machines = uniform(2, 12);
      for (int m = 0; m < machines; ++m) {
        const int gpus = pick({1, 2, 2, 3, 4, 4, 6, 8, 8});
        const bool nvlink = coin(0.5);
        const Link local{(nvlink ? pick({150, 300}) : pick({12, 16, 25})) * 1e9, micro(uniform(1, 3))};
        const Link nic{gbit(pick({10, 25, 50, 100, 200})), micro(uniform(5, 15))};
        if (gpus == 1) {
          add(rack, "m" + std::to_string(m), nic, next_rank_++);
          continue;
        }
        const NodeId machine = add(rack, "m" + std::to_string(m), nic);
        for (int g = 0; g < gpus; ++g) add(machine, "gpu" + std::to_string(g), local, next_rank_++);
      }
    }
    return finish();
  }

  Topology adversarial() {
    start("adversarial");
    const int depth = uniform(2, 4);
    const int top = uniform(2, 5);
    for (int c = 0; c < top; ++c) grow(0, "n" + std::to_string(c), depth - 1);
    return finish();
  }

 private:
  void grow(NodeId parent, const std::string& name, int height) {
    const Link link{pick({0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 25.0, 50.0}) * 1e9, micro(uniform(1, 40))};
    if (height == 0) {
      add(parent, name, link, next_rank_++);
      return;
    }
    const NodeId node = add(parent, name, link);
    const int children = uniform(1, 5);
    for (int c = 0; c < children; ++c)
      grow(node, name + "." + std::to_string(c), coin(0.15) ? 0 : height - 1);
  }

  void start(const std::string& family) {
    graph_ = TopoGraph();
    next_rank_ = 0;
    name_ = family + "-" + std::to_string(count_++);
    TopoNodeProps root;
    root.name = "root";
    const auto v = boost::add_vertex(graph_);
    graph_[v] = std::move(root);
  }

  Topology finish() {
    // An all-reduce needs two learners.
    while (next_rank_ < 2) {
      const int rank = next_rank_++;
      add(0, "extra" + std::to_string(rank), {1e9, 1e-6}, rank);
    }
    return Topology(name_, std::move(graph_));
  }

  NodeId add(NodeId parent, const std::string& name, Link link, int rank = -1) {
    TopoNodeProps props;
    props.name = name;
    props.link = link;
    props.rank = rank;
    const auto v = boost::add_vertex(graph_);
    graph_[v] = std::move(props);
    boost::add_edge(parent, v, link, graph_);
    return static_cast<NodeId>(v);
  }

  static double gbit(double g) { return g * 1e9 / 8; }
  static double micro(double us) { return us * 1e-6; }
  int uniform(int low, int high) { return std::uniform_int_distribution<int>(low, high)(rng_); }
  bool coin(double p) { return std::bernoulli_distribution(p)(rng_); }
  template <class T>
  T pick(std::initializer_list<T> values) {
    return *(values.begin() + uniform(0, static_cast<int>(values.size()) - 1));
  }

  std::mt19937_64 rng_;
  TopoGraph graph_;
  std::string name_;
  int next_rank_ = 0;
  int count_ = 0;
};

}  // namespace flexplan::bench
