// The topology's optional "hop_overhead": read and held to 0-1 s, bad values named, written back
// by the writer, part of the hash only when given.
#include <limits>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "topology/topology.hpp"
#include "topology/topology_writer.hpp"

namespace flexplan {
namespace {

std::string with_field(const std::string& field) {
  return R"({"name": "h", )" + field + R"( "root": {"name": "s", "children": [
    {"name": "m0", "link": {"bandwidth": "1 Gbit/s", "latency": "50 us"}, "children": [
      {"name": "g", "count": 2, "link": {"bandwidth": "10 GB/s", "latency": "5 us"}}]},
    {"name": "m1", "link": {"bandwidth": "1 Gbit/s", "latency": "50 us"}, "children": [
      {"name": "g", "count": 3, "link": {"bandwidth": "10 GB/s", "latency": "5 us"}}]}]}})";
}

TEST(TopologyHopOverhead, AbsentUnlessGiven) {
  const Topology plain = parse_topology(with_field(""));
  EXPECT_FALSE(plain.hop_overhead().has_value());
  const Topology given = parse_topology(with_field(R"("hop_overhead": "40 us",)"));
  ASSERT_TRUE(given.hop_overhead().has_value());
  EXPECT_DOUBLE_EQ(*given.hop_overhead(), 40e-6);
  // Any latency unit; 0 is a figure (the pure link model), not "none".
  EXPECT_DOUBLE_EQ(*parse_topology(with_field(R"("hop_overhead": "0.04 ms",)")).hop_overhead(), 40e-6);
  const Topology zero = parse_topology(with_field(R"("hop_overhead": "0 s",)"));
  ASSERT_TRUE(zero.hop_overhead().has_value());
  EXPECT_EQ(*zero.hop_overhead(), 0.0);
}

TEST(TopologyHopOverhead, CountsInTheHashOnlyWhenGiven) {
  const uint64_t plain = parse_topology(with_field("")).hash();
  const uint64_t forty = parse_topology(with_field(R"("hop_overhead": "40 us",)")).hash();
  EXPECT_NE(forty, plain);
  EXPECT_NE(parse_topology(with_field(R"("hop_overhead": "0 s",)")).hash(), plain);
  EXPECT_EQ(parse_topology(with_field(R"("hop_overhead": "40000 ns",)")).hash(), forty);
  EXPECT_NE(parse_topology(with_field(R"("hop_overhead": "41 us",)")).hash(), forty);
}

TEST(TopologyHopOverhead, WriterRoundTrip) {
  for (const char* figure : {"40 us", "0 s", "0.71 us", "1 s", "123.456789 us"}) {
    const Topology topo = parse_topology(with_field(std::string(R"("hop_overhead": ")") + figure + "\","));
    const std::string written = topology_to_json(topo);
    EXPECT_NE(written.find("hop_overhead"), std::string::npos) << written;
    const Topology back = parse_topology(written);
    ASSERT_TRUE(back.hop_overhead().has_value()) << figure;
    EXPECT_EQ(*back.hop_overhead(), *topo.hop_overhead()) << figure;
    EXPECT_EQ(back.hash(), topo.hash()) << figure;
  }
  const std::string plain = topology_to_json(parse_topology(with_field("")));
  EXPECT_EQ(plain.find("hop_overhead"), std::string::npos) << plain;
  EXPECT_FALSE(parse_topology(plain).hop_overhead().has_value());
}

TEST(TopologyHopOverhead, BadValuesNameTheField) {
  for (const char* bad : {R"("fast")", "40", R"("40")", R"("-1 us")", R"("2 s")", R"("1e400 s")", R"("nan us")",
                          R"("inf s")", R"("40 Gbit/s")", "null", R"(["40 us"])"}) {
    try {
      parse_topology(with_field(std::string(R"("hop_overhead": )") + bad + ","));
      ADD_FAILURE() << bad << " was accepted";
    } catch (const TopologyError& e) {
      EXPECT_NE(std::string(e.what()).find("hop_overhead"), std::string::npos) << bad << ": " << e.what();
    }
  }
}

TEST(TopologyHopOverhead, SetterHoldsTheBounds) {
  Topology topo = parse_topology(with_field(""));
  topo.set_hop_overhead(2e-6);
  EXPECT_EQ(topo.hop_overhead(), std::optional<double>(2e-6));
  topo.set_hop_overhead(std::nullopt);
  EXPECT_FALSE(topo.hop_overhead().has_value());
  for (double bad : {-1e-9, 1.5, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()})
    EXPECT_THROW(topo.set_hop_overhead(bad), TopologyError) << bad;
}

}  // namespace
}  // namespace flexplan
