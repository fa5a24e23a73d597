// Nesting far past the limits (issue 39) is refused with its location, without a crash, and in
// time linear in the text (bench/parsing/deep_nesting.sh times it; no test here is timed).
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "cli_run.hpp"
#include "topology/topology.hpp"

namespace flexplan {
namespace {

const std::string kLink = R"("link": {"bandwidth": "1 GB/s"})";

std::string learner(const std::string& name) { return R"({"name": ")" + name + R"(", )" + kLink + "}"; }

std::string with_children(const std::string& children) {
  return R"({"name": "t", "root": {"name": "s", "children": [)" + children + "]}}";
}

// A chain of `levels` nodes below the root, each written out in full, with two learners at its
// end (levels + 1 below the root).
std::string nested_nodes(int levels) {
  std::string json = R"({"name": "t", "root": {"name": "s", "children": [)";
  json.reserve(static_cast<size_t>(levels) * 60 + 100);
  for (int i = 0; i < levels; ++i) json += R"({"name": "n", )" + kLink + R"(, "children": [)";
  json += learner("leaf") + "," + learner("leaf2");
  for (int i = 0; i < levels; ++i) json += "]}";
  return json + "]}}";
}

// The error parse_topology throws for `json`, or a failure when it accepts it.
TopologyError error_of(const std::string& json) {
  try {
    parse_topology(json, "test.json");
  } catch (const TopologyError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted";
  return TopologyError("", "");
}

// Each node deeper than the limit used to build its path for an error that was then thrown
// away: 2,000 levels took 2.9 s and 10,000 more than a minute. The limit is now checked before
// any path is built (bench/parsing/deep_nesting.sh times it).
TEST(TopologyDeepNesting, HundredThousandNestedNodesAreRefused) {
  const TopologyError e = error_of(nested_nodes(100000));
  std::string where = "root";
  for (int level = 1; level <= 65; ++level) where += ".children[0]";
  EXPECT_EQ(e.where(), where) << e.what();
  EXPECT_NE(std::string(e.what()).find("the tree is nested more than 64 levels deep"),
            std::string::npos)
      << e.what();
}

// A million levels, in the smallest text: the reader keeps nothing past 256 open containers, and
// nlohmann's parser keeps a bit per level, so neither the stack nor the memory grows with depth.
TEST(TopologyDeepNesting, MillionNestedNodesAreRefusedWithoutCrashing) {
  const int levels = 1000000;
  std::string json = R"({"name": "t", "root": {"name": "s", "children": [)";
  for (int i = 0; i < levels; ++i) json += R"({"children": [)";
  json += "{}";
  for (int i = 0; i < levels; ++i) json += "]}";
  json += "]}}";
  const TopologyError e = error_of(json);
  EXPECT_EQ(e.where().rfind("root.children[0].children[0]", 0), 0u) << e.where();
  EXPECT_NE(std::string(e.what()).find("nested more than 64 levels deep"), std::string::npos)
      << e.what();
}

// Nesting inside a value (no nodes involved) is refused at the value that holds it.
TEST(TopologyDeepNesting, MillionNestedArraysInALinkAreRefused) {
  const int levels = 1000000;
  const std::string json = with_children(learner("a") + R"(, {"name": "b", "link": )" +
                                         std::string(levels, '[') + std::string(levels, ']') + "}");
  const TopologyError e = error_of(json);
  EXPECT_EQ(e.where().rfind("root.children[1].link[0][0]", 0), 0u) << e.where();
  EXPECT_NE(std::string(e.what()).find("the JSON is nested more than 256 levels deep"),
            std::string::npos)
      << e.what();
}

// Reading on past the skipped nesting keeps the order of errors: a syntax error anywhere first.
TEST(TopologyDeepNesting, SyntaxErrorsAfterDeepNestingAreStillReported) {
  const int levels = 1000000;
  const TopologyError unclosed = error_of(R"({"name": "t", "root": )" + std::string(levels, '['));
  EXPECT_NE(std::string(unclosed.what()).find("invalid JSON"), std::string::npos)
      << unclosed.what();
  const TopologyError late = error_of(R"({"name": "t", "description": )" +
                                      std::string(levels, '[') + std::string(levels, ']') +
                                      R"(, "root": {"name": "s"},})");
  EXPECT_NE(std::string(late.what()).find("invalid JSON"), std::string::npos) << late.what();
  // The top level's fields still come before faults in the nodes: 300 levels of nodes and a
  // root that is fine except for the nesting.
  const TopologyError top = error_of(R"({"name": "", "root": )" +
                                     nested_nodes(300).substr(std::string(R"({"name": "t", "root": )").size()));
  EXPECT_EQ(top.where(), "name") << top.what();
}

// Nesting at the limit is read as before; one level more is refused at the first node past it.
TEST(TopologyDeepNesting, SixtyFourLevelsAreTheLimit) {
  const Topology t = parse_topology(nested_nodes(63));  // learners 64 levels below the root
  EXPECT_EQ(t.num_learners(), 2);
  const TopologyError e = error_of(nested_nodes(64));
  std::string where = "root";
  for (int level = 1; level <= 65; ++level) where += ".children[0]";
  EXPECT_EQ(e.where(), where) << e.what();
}

class TopologyDeepNestingCli : public testing::ScratchDirTest {};

// Malformed input exits 2 in the CLI, however deep.
TEST_F(TopologyDeepNestingCli, DeepNestingExitsWithCode2) {
  const std::string file = path("deep.json");
  std::ofstream(file) << nested_nodes(100000);
  const testing::CliRun run = testing::run_flexplan("topo show '" + file + "'");
  EXPECT_EQ(run.exit_code, 2) << run.output.substr(0, 2000);
  EXPECT_NE(run.output.find("nested more than 64 levels deep"), std::string::npos)
      << run.output.substr(0, 2000);
}

}  // namespace
}  // namespace flexplan
