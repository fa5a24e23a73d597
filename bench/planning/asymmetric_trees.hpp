// Seeded generator of large asymmetric cluster trees for the planning benchmark: core switch,
// zones (when there are many pods), pods, racks, machines and GPUs, with uneven fan-outs at
// every level (machines of 1 to 8 GPUs, racks of 6 to 20 machines, pods of 4 to 10 racks) and
// different link speeds per level and per machine kind.
#pragma once

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "topology/topology.hpp"

namespace flexplan::bench {

class AsymmetricTrees {
 public:
  explicit AsymmetricTrees(uint64_t seed) : rng_(seed) {}

  // A tree with at least `learners` learners (whole pods are added until it has them).
  Topology make(int learners) {
    TopoGraph graph;
    add_node(graph, -1, "core", {});
    struct Pod {
      int racks;
      std::vector<std::vector<int>> gpus;  // per rack, per machine
      int total = 0;
    };
    std::vector<Pod> pods;
    int total = 0;
    while (total < learners) {
      Pod pod;
      pod.racks = uniform(4, 10);
      for (int r = 0; r < pod.racks; ++r) {
        auto& rack = pod.gpus.emplace_back();
        const int machines = uniform(6, 20);
        for (int m = 0; m < machines; ++m) {
          static constexpr int kGpus[] = {1, 2, 3, 4, 4, 6, 8, 8};
          rack.push_back(kGpus[uniform(0, 7)]);
          pod.total += rack.back();
        }
      }
      total += pod.total;
      pods.push_back(std::move(pod));
    }

    // Up to 12 pods hang off the core directly; more are grouped into zones of 4 to 12.
    int rank = 0;
    size_t next_pod = 0;
    const bool zoned = pods.size() > 12;
    for (int zone = 0; next_pod < pods.size(); ++zone) {
      NodeId parent = 0;
      size_t pods_here = pods.size();
      if (zoned) {
        parent = add_node(graph, 0, "zone" + std::to_string(zone), {100e9, 3e-6});
        pods_here = static_cast<size_t>(uniform(4, 12));
      }
      for (size_t p = 0; p < pods_here && next_pod < pods.size(); ++p, ++next_pod) {
        const auto& pod = pods[next_pod];
        const NodeId pod_node = add_node(graph, parent, "pod" + std::to_string(p),
                                         {uniform(0, 1) ? 50e9 : 25e9, 2e-6});
        for (size_t r = 0; r < pod.gpus.size(); ++r) {
          const NodeId rack = add_node(graph, pod_node, "rack" + std::to_string(r),
                                       {uniform(0, 1) ? 25e9 : 12.5e9, 2e-6});
          for (size_t m = 0; m < pod.gpus[r].size(); ++m) {
            const int gpus = pod.gpus[r][m];
            const Link uplink = gpus >= 4 ? Link{12.5e9, 5e-6} : Link{3.125e9, 10e-6};
            const NodeId machine = add_node(graph, rack, "m" + std::to_string(m), uplink);
            for (int g = 0; g < gpus; ++g)
              add_node(graph, machine, "gpu" + std::to_string(g), {12e9, 2e-6}, rank++);
          }
        }
      }
    }
    return Topology("asymmetric-" + std::to_string(rank), std::move(graph));
  }

 private:
  NodeId add_node(TopoGraph& graph, NodeId parent, const std::string& name, Link link,
                  int rank = -1) {
    TopoNodeProps props;
    props.name = name;
    props.link = link;
    props.rank = rank;
    // Vertex first, properties after: Boost's property-taking add_vertex trips a false
    // -Wuninitialized in GCC 12 sanitizer builds.
    const auto v = boost::add_vertex(graph);
    graph[v] = std::move(props);
    if (parent >= 0) boost::add_edge(parent, v, link, graph);
    return static_cast<NodeId>(v);
  }
  int uniform(int low, int high) { return std::uniform_int_distribution<int>(low, high)(rng_); }

  std::mt19937_64 rng_;
};

}  // namespace flexplan::bench
