// The topologies shipped in topologies/: every file loads, and each one is the cluster its
// name and docs/topology.md promise.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "topology/topology.hpp"

namespace flexplan {
namespace {

const std::string kDir = FLEXPLAN_SOURCE_DIR "/topologies/";

Topology bundled(const std::string& name) { return load_topology(kDir + name + ".json"); }

// Learners under each child of the root, in order.
std::vector<int> learners_per_child(const Topology& t, NodeId n) {
  std::vector<int> sizes;
  for (NodeId c : t.children(n)) sizes.push_back(static_cast<int>(t.learners_under(c).size()));
  return sizes;
}

std::set<double> uplink_bandwidths_at_depth(const Topology& t, int depth) {
  std::set<double> figures;
  for (NodeId v = 0; v < t.num_nodes(); ++v)
    if (t.depth(v) == depth) figures.insert(t.uplink(v).bandwidth);
  return figures;
}

TEST(TopologyBundled, EveryFileLoads) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kDir)) {
    if (entry.path().extension() != ".json") continue;
    SCOPED_TRACE(entry.path().string());
    ++files;
    const Topology t = load_topology(entry.path().string());
    EXPECT_GE(t.num_learners(), 2);
    EXPECT_EQ(t.name(), entry.path().stem().string()) << "the title matches the file name";
  }
  EXPECT_GE(files, 15);
}

TEST(TopologyBundled, IssueExampleIsKeptVerbatim) {
  std::ifstream in(kDir + "two-machines-2+3.json");
  std::stringstream text;
  text << in.rdbuf();
  const std::string expected =
      R"({"name": "two-machines-2+3",
 "root": {"name": "switch", "children": [
     {"name": "m0", "link": {"bandwidth": "1 Gbit/s", "latency": "50 us"},
      "children": [{"name": "gpu", "count": 2, "link": {"bandwidth": "10 GB/s", "latency": "5 us"}}]},
     {"name": "m1", "link": {"bandwidth": "1 Gbit/s", "latency": "50 us"},
      "children": [{"name": "gpu{i}", "count": 3, "link": {"bandwidth": "10 GB/s", "latency": "5 us"}}]}]}}
)";
  EXPECT_EQ(text.str(), expected);
}

TEST(TopologyBundled, PaperTestbeds) {
  struct Testbed {
    const char* name;
    std::vector<int> gpus;
  };
  const Testbed testbeds[] = {{"paper-2m-4", {2, 2}},     {"paper-2m-5", {2, 3}},
                              {"paper-2m-6", {3, 3}},     {"paper-2m-7", {3, 4}},
                              {"paper-2m-8", {4, 4}},     {"paper-3m-9", {3, 3, 3}},
                              {"paper-3m-10", {3, 3, 4}}, {"paper-3m-11", {3, 4, 4}},
                              {"paper-3m-12", {4, 4, 4}}};
  for (const Testbed& testbed : testbeds) {
    SCOPED_TRACE(testbed.name);
    const Topology t = bundled(testbed.name);
    EXPECT_EQ(learners_per_child(t, t.root()), testbed.gpus);
    EXPECT_EQ(t.num_levels(), 2);
    const bool even = std::adjacent_find(testbed.gpus.begin(), testbed.gpus.end(),
                                         std::not_equal_to<>()) == testbed.gpus.end();
    EXPECT_EQ(t.is_symmetric(), even);
    for (NodeId machine : t.children(t.root())) {
      EXPECT_EQ(t.uplink(machine).bandwidth, parse_bandwidth("10 Gbit/s"));
      EXPECT_EQ(t.uplink(machine).latency, parse_latency("50 us"));
      for (NodeId gpu : t.children(machine)) {
        EXPECT_TRUE(t.is_learner(gpu));
        EXPECT_EQ(t.uplink(gpu).bandwidth, parse_bandwidth("12 GB/s"));
        EXPECT_EQ(t.uplink(gpu).latency, parse_latency("5 us"));
      }
    }
  }
}

TEST(TopologyBundled, SymmetricClusters) {
  const Topology cloud = bundled("cloud-16x8-25gbe");
  EXPECT_EQ(cloud.num_learners(), 128);
  EXPECT_EQ(learners_per_child(cloud, cloud.root()), std::vector<int>(16, 8));
  EXPECT_TRUE(cloud.is_symmetric());
  EXPECT_EQ(uplink_bandwidths_at_depth(cloud, 1), std::set<double>{parse_bandwidth("25 Gbit/s")});
  EXPECT_EQ(uplink_bandwidths_at_depth(cloud, 2), std::set<double>{parse_bandwidth("150 GB/s")});

  const Topology ib = bundled("ib-edr-4gpu");
  EXPECT_EQ(ib.num_learners(), 64);
  EXPECT_EQ(learners_per_child(ib, ib.root()), std::vector<int>(16, 4));
  EXPECT_TRUE(ib.is_symmetric());
  EXPECT_EQ(uplink_bandwidths_at_depth(ib, 1), std::set<double>{parse_bandwidth("100 Gbit/s")});
}

TEST(TopologyBundled, AsymmetricThreeLevelClusters) {
  for (const char* name : {"asym-3level-a", "asym-3level-b"}) {
    SCOPED_TRACE(name);
    const Topology t = bundled(name);
    EXPECT_EQ(t.num_levels(), 3);
    EXPECT_FALSE(t.is_symmetric());
    const std::vector<int> racks = learners_per_child(t, t.root());
    EXPECT_GE(racks.size(), 2u);
    EXPECT_NE(*std::min_element(racks.begin(), racks.end()),
              *std::max_element(racks.begin(), racks.end()))
        << "racks of different sizes";
    std::set<int> gpus_per_machine;
    for (NodeId machine : t.nodes_at_level(0))
      gpus_per_machine.insert(static_cast<int>(t.learners_under(machine).size()));
    EXPECT_EQ(*gpus_per_machine.begin(), 1);
    EXPECT_EQ(*gpus_per_machine.rbegin(), 8);
    EXPECT_GE(uplink_bandwidths_at_depth(t, 1).size(), 3u) << "mixed rack uplinks";
  }
}

TEST(TopologyBundled, LargeClusterIsCompact) {
  const std::string path = kDir + "large-10k.json";
  const Topology t = load_topology(path);
  EXPECT_GE(t.num_learners(), 10000);
  EXPECT_FALSE(t.is_symmetric());
  EXPECT_LT(std::filesystem::file_size(path), 8192u) << "written compactly with count";
}

}  // namespace
}  // namespace flexplan
