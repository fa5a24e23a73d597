// The content hash: the same topology written differently hashes the same, any change that
// matters to a plan changes it, and it is the documented FNV-1a 64 serialization.
#include <bit>
#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "topology/topology.hpp"
#include "topology/topology_writer.hpp"

namespace flexplan {
namespace {

// Two machines, 2 + 3 GPUs, written plainly. Variants below rewrite it.
const char* const kPlain = R"({"name": "plain", "root": {"name": "switch", "children": [
  {"name": "m0", "link": {"bandwidth": "1 Gbit/s", "latency": "50 us"}, "children": [
    {"name": "gpu0", "link": {"bandwidth": "10 GB/s", "latency": "5 us"}},
    {"name": "gpu1", "link": {"bandwidth": "10 GB/s", "latency": "5 us"}}]},
  {"name": "m1", "link": {"bandwidth": "1 Gbit/s", "latency": "50 us"}, "children": [
    {"name": "gpu0", "link": {"bandwidth": "10 GB/s", "latency": "5 us"}},
    {"name": "gpu1", "link": {"bandwidth": "10 GB/s", "latency": "5 us"}},
    {"name": "gpu2", "link": {"bandwidth": "10 GB/s", "latency": "5 us"}}]}]}})";

uint64_t hash_of(const std::string& json) { return parse_topology(json).hash(); }

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(TopologyHash, SameTopologyWrittenDifferently) {
  const uint64_t plain = hash_of(kPlain);
  // count, with and without {i}; other units; other key order; another title; ranks spelled
  // out in their default order.
  EXPECT_EQ(hash_of(R"({"description": "same cluster", "name": "other title",
    "root": {"children": [
      {"children": [{"count": 2, "name": "gpu", "link": {"latency": "0.005 ms", "bandwidth": "80 Gbit/s"}}],
       "link": {"latency": "50000 ns", "bandwidth": "125 MB/s"}, "name": "m0"},
      {"name": "m1", "link": {"bandwidth": "0.125 GB/s", "latency": "0.05 ms"},
       "children": [{"name": "gpu{i}", "count": 3, "link": {"bandwidth": "10000 MB/s", "latency": "5 us"}}]}],
    "name": "switch"}})"),
            plain);
  EXPECT_EQ(parse_topology(kPlain).hash(), parse_topology(kPlain, "another-source.json").hash());
}

TEST(TopologyHash, ExplicitDefaultRanksHashLikeImplicitOnes) {
  const std::string implicit = R"({"name": "t", "root": {"name": "s", "children": [
    {"name": "a", "link": {"bandwidth": "1 GB/s"}}, {"name": "b", "link": {"bandwidth": "1 GB/s"}}]}})";
  const std::string explicit_ranks = R"({"name": "t", "root": {"name": "s", "children": [
    {"name": "a", "rank": 0, "link": {"bandwidth": "1 GB/s"}}, {"name": "b", "rank": 1, "link": {"bandwidth": "1 GB/s", "latency": "0 s"}}]}})";
  EXPECT_EQ(hash_of(implicit), hash_of(explicit_ranks));
}

TEST(TopologyHash, EveryChangeThatMattersChangesIt) {
  const uint64_t plain = hash_of(kPlain);
  const std::string changed[] = {
      replaced(kPlain, R"("1 Gbit/s", "latency": "50 us"}, "children": [
    {"name": "gpu0")",
               R"("2 Gbit/s", "latency": "50 us"}, "children": [
    {"name": "gpu0")"),                                                    // one bandwidth
      replaced(kPlain, R"("50 us")", R"("51 us")"),                         // one latency
      replaced(kPlain, R"("name": "m1")", R"("name": "m2")"),               // a name
      replaced(kPlain, R"("name": "switch")", R"("name": "core")"),         // the root's name
      replaced(kPlain, R"({"name": "gpu2", "link": {"bandwidth": "10 GB/s", "latency": "5 us"}})",
               R"({"name": "gpu2", "link": {"bandwidth": "10 GB/s", "latency": "5 us"}, "children": [
                  {"name": "x", "link": {"bandwidth": "1 GB/s"}}, {"name": "y", "link": {"bandwidth": "1 GB/s"}}]})"),
  };
  for (const std::string& json : changed) EXPECT_NE(hash_of(json), plain) << json;

  // Child order and ranks matter: a plan addresses learners by rank.
  const std::string ab = R"({"name": "t", "root": {"name": "s", "children": [
    {"name": "a", "RA" "link": {"bandwidth": "1 GB/s"}}, {"name": "b", "RB" "link": {"bandwidth": "1 GB/s"}}]}})";
  auto with_ranks = [&](const std::string& ra, const std::string& rb) {
    return replaced(replaced(ab, R"("RA" )", ra), R"("RB" )", rb);
  };
  const uint64_t in_order = hash_of(with_ranks("", ""));
  EXPECT_NE(hash_of(with_ranks(R"("rank": 1, )", R"("rank": 0, )")), in_order);
  const std::string swapped = R"({"name": "t", "root": {"name": "s", "children": [
    {"name": "b", "link": {"bandwidth": "1 GB/s"}}, {"name": "a", "link": {"bandwidth": "1 GB/s"}}]}})";
  EXPECT_NE(hash_of(swapped), in_order);
}

// The learners' reduction rate is part of what a plan is made for; a topology without one keeps
// the hash it always had, and the same rate in other units hashes the same.
TEST(TopologyHash, ReductionRateCountsWhenGiven) {
  const uint64_t plain = hash_of(kPlain);
  const std::string with_rate = replaced(kPlain, R"("name": "plain",)",
                                         R"("name": "plain", "reduce_bandwidth": "6 GB/s",)");
  const Topology topo = parse_topology(with_rate);
  EXPECT_DOUBLE_EQ(topo.reduce_bandwidth(), 6e9);
  EXPECT_DOUBLE_EQ(parse_topology(kPlain).reduce_bandwidth(), 0);
  EXPECT_NE(topo.hash(), plain);
  EXPECT_EQ(hash_of(replaced(with_rate, "6 GB/s", "48 Gbit/s")), topo.hash());
  EXPECT_NE(hash_of(replaced(with_rate, "6 GB/s", "7 GB/s")), topo.hash());
  // The writer keeps it: what it writes parses back to the same topology.
  EXPECT_EQ(parse_topology(topology_to_json(topo)).hash(), topo.hash());
}

// Recomputes the documented serialization (docs/topology.md) independently for a tiny tree.
class Fnv {
 public:
  void byte(unsigned char b) { h_ = (h_ ^ b) * 0x100000001b3ULL; }
  void text(const std::string& s) {
    for (unsigned char c : s) byte(c);
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) byte(static_cast<unsigned char>((v >> (8 * i)) & 0xff));
  }
  uint64_t h_ = 0xcbf29ce484222325ULL;
};

TEST(TopologyHash, IsTheDocumentedFnv1aSerialization) {
  const Topology t = parse_topology(R"({"name": "t", "root": {"name": "sw", "children": [
    {"name": "a", "link": {"bandwidth": "1 GB/s", "latency": "2 us"}},
    {"name": "bb", "link": {"bandwidth": "8 Gbit/s"}}]}})");
  Fnv f;
  f.text("flexplan.topology.v1");
  f.u64(2), f.text("sw"), f.u64(2), f.u64(static_cast<uint64_t>(int64_t{-1}));
  f.u64(1), f.text("a"), f.u64(0), f.u64(0), f.u64(std::bit_cast<uint64_t>(1e9)),
      f.u64(std::bit_cast<uint64_t>(2e-6));
  f.u64(2), f.text("bb"), f.u64(0), f.u64(1), f.u64(std::bit_cast<uint64_t>(1e9)),
      f.u64(std::bit_cast<uint64_t>(0.0));
  EXPECT_EQ(t.hash(), f.h_);

  const std::string hex = t.hash_hex();
  ASSERT_EQ(hex.size(), 16u);
  EXPECT_EQ(hex.find_first_not_of("0123456789abcdef"), std::string::npos) << hex;
  EXPECT_EQ(std::stoull(hex, nullptr, 16), t.hash());
}

}  // namespace
}  // namespace flexplan
