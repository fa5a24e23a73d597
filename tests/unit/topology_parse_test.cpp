// The JSON form: the issue's example as written, count expansion, rank order, and every kind
// of bad input with the location and message it must report.
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>

#include <gtest/gtest.h>

#include "topology/topology.hpp"

namespace flexplan {
namespace {

// The issue's example, verbatim.
const char* const kExample = R"({"name": "two-machines-2+3",
 "root": {"name": "switch", "children": [
     {"name": "m0", "link": {"bandwidth": "1 Gbit/s", "latency": "50 us"},
      "children": [{"name": "gpu", "count": 2, "link": {"bandwidth": "10 GB/s", "latency": "5 us"}}]},
     {"name": "m1", "link": {"bandwidth": "1 Gbit/s", "latency": "50 us"},
      "children": [{"name": "gpu{i}", "count": 3, "link": {"bandwidth": "10 GB/s", "latency": "5 us"}}]}]}})";

// A topology whose root has the given children (JSON array contents).
std::string with_children(const std::string& children) {
  return R"({"name": "t", "root": {"name": "s", "children": [)" + children + "]}}";
}
const std::string kLink = R"("link": {"bandwidth": "1 GB/s"})";
std::string learner(const std::string& name, const std::string& extra = "") {
  return R"({"name": ")" + name + R"(", )" + kLink + extra + "}";
}

std::vector<std::string> full_names_of_learners(const Topology& t) {
  std::vector<std::string> names;
  for (int r = 0; r < t.num_learners(); ++r) names.push_back(t.full_name(t.learner_node(r)));
  return names;
}

TEST(TopologyParse, IssueExampleAsWritten) {
  const Topology t = parse_topology(kExample);
  EXPECT_EQ(t.name(), "two-machines-2+3");
  EXPECT_EQ(t.num_nodes(), 8);
  EXPECT_EQ(t.num_learners(), 5);
  EXPECT_EQ(full_names_of_learners(t),
            (std::vector<std::string>{"switch/m0/gpu0", "switch/m0/gpu1", "switch/m1/gpu0",
                                      "switch/m1/gpu1", "switch/m1/gpu2"}));
  const NodeId m1 = t.parent(t.learner_node(2));
  EXPECT_EQ(t.full_name(m1), "switch/m1");
  EXPECT_EQ(t.uplink(m1).bandwidth, 1e9 / 8);
  EXPECT_EQ(t.uplink(m1).latency, 50e-6);
  EXPECT_EQ(t.uplink(t.learner_node(4)).bandwidth, 10e9);
  EXPECT_EQ(t.uplink(t.learner_node(4)).latency, 5e-6);
}

TEST(TopologyParse, CountExpandsNamesWithAndWithoutPlaceholder) {
  const Topology t = parse_topology(with_children(
      learner("gpu", R"(, "count": 3)") + "," + learner("x{i}y{i}", R"(, "count": 2)") + "," +
      learner("solo", R"(, "count": 1)")));
  EXPECT_EQ(full_names_of_learners(t),
            (std::vector<std::string>{"s/gpu0", "s/gpu1", "s/gpu2", "s/x0y0", "s/x1y1", "s/solo0"}));
}

TEST(TopologyParse, CountReplicatesWholeSubtrees) {
  const Topology t = parse_topology(with_children(
      R"({"name": "m{i}", "count": 3, "link": {"bandwidth": "1 Gbit/s"},
          "children": [{"name": "gpu{i}", "count": 4, "link": {"bandwidth": "10 GB/s"}}]})"));
  EXPECT_EQ(t.num_learners(), 12);
  EXPECT_EQ(t.num_nodes(), 1 + 3 + 12);
  EXPECT_EQ(t.full_name(t.learner_node(9)), "s/m2/gpu1");
  EXPECT_EQ(t.uplink(t.learner_node(9)).latency, 0.0) << "latency defaults to 0";
}

TEST(TopologyParse, RanksFollowDepthFirstFileOrder) {
  const Topology t = parse_topology(with_children(
      R"({"name": "m0", )" + kLink + R"(, "children": [)" + learner("a") + "," + learner("b") +
      "]}," + learner("c") + "," + R"({"name": "m1", )" + kLink + R"(, "children": [)" +
      learner("d") + "]}"));
  EXPECT_EQ(full_names_of_learners(t),
            (std::vector<std::string>{"s/m0/a", "s/m0/b", "s/c", "s/m1/d"}));
}

TEST(TopologyParse, ExplicitRanksArePermutations) {
  const Topology t = parse_topology(with_children(
      learner("a", R"(, "rank": 2)") + "," + learner("b", R"(, "rank": 0)") + "," +
      learner("c", R"(, "rank": 1)")));
  EXPECT_EQ(full_names_of_learners(t), (std::vector<std::string>{"s/b", "s/c", "s/a"}));
  EXPECT_EQ(t.rank_of(t.learner_node(2)), 2);
}

TEST(TopologyParse, ExplicitRankWithCountNumbersTheCopies) {
  const Topology t = parse_topology(
      with_children(learner("g", R"(, "count": 2, "rank": 1)") + "," + learner("h", R"(, "rank": 0)")));
  EXPECT_EQ(full_names_of_learners(t), (std::vector<std::string>{"s/h", "s/g0", "s/g1"}));
}

TEST(TopologyParse, DescriptionIsOptional) {
  const Topology t = parse_topology(
      R"({"description": "x", "root": {"name": "s", "children": [)" + learner("a") + "," +
      learner("b") + R"(]}, "name": "t"})");
  EXPECT_EQ(t.num_learners(), 2);
}

struct BadInput {
  const char* label;
  std::string json;
  std::string where;    // expected TopologyError::where()
  std::string message;  // expected to appear in what()
};

std::vector<BadInput> bad_inputs() {
  const std::string two = learner("a") + "," + learner("b");
  return {
      {"invalid json", "{\n  \"name\": \"t\",\n  \"root\": }", "test.json:3:11", "invalid JSON"},
      {"empty file", "", "test.json:1:1", "invalid JSON"},
      {"not an object", "[1, 2]", "top level", "must be an object"},
      {"missing root", R"({"name": "t"})", "top level", "missing field \"root\""},
      {"missing name", R"({"root": {"name": "s", "children": [)" + two + "]}}", "top level",
       "missing field \"name\""},
      {"unknown top field", R"({"name": "t", "rooot": 1, "root": {"name": "s", "children": [)" +
                                two + "]}}",
       "top level", "unknown field \"rooot\" (did you mean \"root\"?)"},
      {"description not a string",
       R"({"name": "t", "description": 7, "root": {"name": "s", "children": [)" + two + "]}}",
       "description", "must be a string"},
      {"root not an object", R"({"name": "t", "root": []})", "root", "must be a node object"},
      {"node without name", with_children(R"({)" + kLink + "}," + learner("b")),
       "root.children[0]", "missing field \"name\""},
      {"name not a string", with_children(R"({"name": 3, )" + kLink + "}," + learner("b")),
       "root.children[0].name", "must be a string"},
      {"empty name", with_children(learner("") + "," + learner("b")), "root.children[0].name",
       "cannot be empty"},
      {"slash in name", with_children(learner("a/b") + "," + learner("b")),
       "root.children[0].name", "contains '/'"},
      {"placeholder without count", with_children(learner("g{i}") + "," + learner("b")),
       "root.children[0].name", "needs \"count\""},
      {"other braces", with_children(learner("g{j}", R"(, "count": 2)") + "," + learner("b")),
       "root.children[0].name", "braces other than"},
      {"unknown node field",
       with_children(R"({"name": "m", )" + kLink + R"(, "chidren": []}, )" + learner("b")),
       "root.children[0]", "unknown field \"chidren\" (did you mean \"children\"?)"},
      {"missing link", with_children(R"({"name": "a"}, )" + learner("b")), "root.children[0]",
       "missing field \"link\""},
      {"link on root",
       R"({"name": "t", "root": {"name": "s", "link": {"bandwidth": "1 GB/s"}, "children": [)" +
           two + "]}}",
       "root.link", "the root has no parent"},
      {"link not an object", with_children(R"({"name": "a", "link": "1 GB/s"}, )" + learner("b")),
       "root.children[0].link", "must be an object"},
      {"link without bandwidth",
       with_children(R"({"name": "a", "link": {"latency": "1 us"}}, )" + learner("b")),
       "root.children[0].link", "missing field \"bandwidth\""},
      {"unknown link field",
       with_children(R"({"name": "a", "link": {"bandwith": "1 GB/s"}}, )" + learner("b")),
       "root.children[0].link", "unknown field \"bandwith\" (did you mean \"bandwidth\"?)"},
      {"bandwidth without unit",
       with_children(learner("a") + R"(, {"name": "b", "link": {"bandwidth": "10"}})"),
       "root.children[1].link.bandwidth", "\"10\" has no unit"},
      {"bandwidth as a number",
       with_children(learner("a") + R"(, {"name": "b", "link": {"bandwidth": 10}})"),
       "root.children[1].link.bandwidth", "must be a string with a unit"},
      {"bandwidth zero",
       with_children(learner("a") + R"(, {"name": "b", "link": {"bandwidth": "0 Gbit/s"}})"),
       "root.children[1].link.bandwidth", "is zero"},
      {"bandwidth negative",
       with_children(learner("a") + R"(, {"name": "b", "link": {"bandwidth": "-5 Gbit/s"}})"),
       "root.children[1].link.bandwidth", "is negative"},
      {"bandwidth not finite",
       with_children(learner("a") + R"(, {"name": "b", "link": {"bandwidth": "inf Gbit/s"}})"),
       "root.children[1].link.bandwidth", "not finite"},
      {"bandwidth unit case",
       with_children(learner("a") + R"(, {"name": "b", "link": {"bandwidth": "10 gbit/s"}})"),
       "root.children[1].link.bandwidth", "unknown bandwidth unit \"gbit/s\""},
      {"latency without unit",
       with_children(learner("a") +
                     R"(, {"name": "b", "link": {"bandwidth": "1 GB/s", "latency": "5"}})"),
       "root.children[1].link.latency", "\"5\" has no unit"},
      {"latency negative",
       with_children(learner("a") +
                     R"(, {"name": "b", "link": {"bandwidth": "1 GB/s", "latency": "-5 us"}})"),
       "root.children[1].link.latency", "is negative"},
      {"latency not finite",
       with_children(learner("a") +
                     R"(, {"name": "b", "link": {"bandwidth": "1 GB/s", "latency": "nan us"}})"),
       "root.children[1].link.latency", "not finite"},
      {"duplicate sibling names", with_children(learner("a") + "," + learner("a")),
       "root.children[1]", "\"a\" is already used by a sibling at root.children[0]"},
      {"duplicate after expansion",
       with_children(learner("g1") + "," + learner("g", R"(, "count": 3)")),
       "root.children[1] (copy 1)", "\"g1\" is already used by a sibling at root.children[0]"},
      {"duplicate json key", with_children(R"({"name": "a", "name": "b", )" + kLink + "}," +
                                           learner("b")),
       "root.children[0].name", "appears twice"},
      {"children not an array",
       with_children(R"({"name": "a", )" + kLink + R"(, "children": {}}, )" + learner("b")),
       "root.children[0].children", "must be an array"},
      {"empty children",
       with_children(R"({"name": "a", )" + kLink + R"(, "children": []}, )" + learner("b")),
       "root.children[0].children", "is empty"},
      {"count zero", with_children(learner("a", R"(, "count": 0)") + "," + learner("b")),
       "root.children[0].count", "at least 1, got 0"},
      {"count negative", with_children(learner("a", R"(, "count": -2)") + "," + learner("b")),
       "root.children[0].count", "at least 1, got -2"},
      {"count fractional", with_children(learner("a", R"(, "count": 2.5)") + "," + learner("b")),
       "root.children[0].count", "whole number"},
      {"count as a string", with_children(learner("a", R"(, "count": "2")") + "," + learner("b")),
       "root.children[0].count", "must be a whole number, got string"},
      {"count on root",
       R"({"name": "t", "root": {"name": "s", "count": 2, "children": [)" + two + "]}}",
       "root.count", "cannot have a count"},
      {"tree too large",
       with_children(R"({"name": "m", "count": 100000, )" + kLink +
                     R"(, "children": [{"name": "g", "count": 1000, )" + kLink + "}]}"),
       "root", "expands to 100,100,001 nodes, more than the limit of 2,000,000"},
      {"astronomical count",
       with_children(R"({"name": "m", "count": 1e300, )" + kLink + "}," + learner("b")), "root",
       "expands to 1e+300 nodes, more than the limit of 2,000,000"},
      // 200,000 full names of 20,000+ characters: 4 GB from a 20 KB file, within the node limit.
      {"long name under a large count",
       with_children(R"({"name": "m{i}", "count": 2, )" + kLink + R"(, "children": [{"name": ")" +
                     std::string(20000, 'x') + R"(", )" + kLink +
                     R"(, "children": [{"name": "g{i}", "count": 100000, )" + kLink + "}]}]}"),
       "root", "names expand to 4,005,880,042 bytes"},
      {"one learner", with_children(learner("a")), "root", "has 1 learner"},
      {"no learners below the root", R"({"name": "t", "root": {"name": "s"}})", "root",
       "has 1 learner"},
      {"rank on a branch",
       with_children(R"({"name": "m", "rank": 0, )" + kLink + R"(, "children": [)" + two + "]}"),
       "root.children[0].rank", "only learners"},
      {"rank duplicate",
       with_children(learner("a", R"(, "rank": 0)") + "," + learner("b", R"(, "rank": 0)")),
       "root.children[1].rank", "rank 0 is already taken by root.children[0]"},
      {"rank out of range",
       with_children(learner("a", R"(, "rank": 0)") + "," + learner("b", R"(, "rank": 2)")),
       "root.children[1].rank", "rank 2 is outside 0..1"},
      {"rank negative",
       with_children(learner("a", R"(, "rank": -1)") + "," + learner("b", R"(, "rank": 0)")),
       "root.children[0].rank", "at least 0"},
      {"rank on some learners only",
       with_children(learner("a", R"(, "rank": 0)") + "," + learner("b")), "root.children[1]",
       "no \"rank\" but root.children[0] has one"},
      {"count beyond a double", with_children(learner("a", R"(, "count": 1e400)") + "," + learner("b")),
       "test.json:1:106", "invalid JSON: number overflow parsing '1e400'"},
      {"rank of 2^63",
       with_children(learner("a", R"(, "rank": 9223372036854775808)") + "," + learner("b", R"(, "rank": 0)")),
       "root.children[0].rank", "rank 9223372036854775808 is outside 0..P-1"},
      {"rank of 1e300",
       with_children(learner("a", R"(, "rank": 1e300)") + "," + learner("b", R"(, "rank": 0)")),
       "root.children[0].rank", "rank 1e+300 is outside 0..P-1"},
      {"rank past the node limit",
       with_children(learner("a", R"(, "rank": 2000000)") + "," + learner("b", R"(, "rank": 0)")),
       "root.children[0].rank", "rank 2000000 is outside 0..P-1: a tree has at most 2,000,000"},
      {"newline in a name", with_children(learner("gpu\\n0") + "," + learner("b")),
       "root.children[0].name", "\"gpu\\n0\" holds the control character U+000A; names must be printable"},
      {"escape character in a name", with_children(learner("a\\u001b[31m") + "," + learner("b")),
       "root.children[0].name", "holds the control character U+001B"},
      {"C1 control in a name", with_children(learner("a\\u0085") + "," + learner("b")),
       "root.children[0].name", "holds the control character U+0085"},
      {"newline in the topology name",
       R"({"name": "two\nlines", "root": {"name": "s", "children": [)" + two + "]}}", "name",
       "holds the control character U+000A"},
      {"tiny bandwidth",
       with_children(learner("a") + R"(, {"name": "b", "link": {"bandwidth": "1e-320 B/s"}})"),
       "root.children[1].link.bandwidth", "is below 1 kbit/s"},
      {"huge latency",
       with_children(learner("a") +
                     R"(, {"name": "b", "link": {"bandwidth": "1 GB/s", "latency": "1e308 s"}})"),
       "root.children[1].link.latency", "is above 100 s"},
      {"rank copies out of range",
       with_children(learner("a", R"(, "count": 2, "rank": 2)") + "," + learner("b", R"(, "rank": 0)")),
       "root.children[0].rank", "rank 3 (copy 1) is outside 0..2"},
  };
}

TEST(TopologyParse, BadInputNamesLocationAndProblem) {
  for (const BadInput& bad : bad_inputs()) {
    SCOPED_TRACE(bad.label);
    try {
      parse_topology(bad.json, "test.json");
      ADD_FAILURE() << "accepted";
    } catch (const TopologyError& e) {
      EXPECT_EQ(e.where(), bad.where) << e.what();
      EXPECT_NE(std::string(e.what()).find(bad.message), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).rfind(bad.where + ": ", 0), 0u) << e.what();
    }
  }
}

// A NUL byte ends the text for the JSON parser; whatever follows it must not be ignored.
TEST(TopologyParse, NulBytesAreRefusedWithTheirLocation) {
  const std::string good = with_children(learner("a") + "," + learner("b"));
  std::string text = good;
  text += std::string("\0", 1) + "garbage that is not JSON";
  try {
    parse_topology(text, "test.json");
    ADD_FAILURE() << "accepted";
  } catch (const TopologyError& e) {
    EXPECT_EQ(e.where(), "test.json:1:" + std::to_string(good.size() + 1)) << e.what();
    EXPECT_NE(std::string(e.what()).find("a NUL byte"), std::string::npos) << e.what();
  }
  text = "{\"name\": \"t\"\n" + std::string("\0", 1) + "}";
  try {
    parse_topology(text, "test.json");
    ADD_FAILURE() << "accepted";
  } catch (const TopologyError& e) {
    EXPECT_EQ(e.where(), "test.json:2:1") << e.what();
  }
}

TEST(TopologyParse, RunawayNestingIsRefused) {
  std::string json = R"({"name": "t", "root": {"name": "s", "children": [)" + learner("a") + ",";
  for (int i = 0; i < 100; ++i) json += R"({"name": "n", )" + kLink + R"(, "children": [)";
  json += learner("leaf");
  for (int i = 0; i < 100; ++i) json += "]}";
  json += "]}}";
  try {
    parse_topology(json);
    ADD_FAILURE() << "accepted";
  } catch (const TopologyError& e) {
    EXPECT_NE(std::string(e.what()).find("nested more than 64 levels"), std::string::npos)
        << e.what();
  }
}

TEST(TopologyParse, DeeplyNestedJsonIsRefusedWithoutCrashing) {
  const int depth = 200000;
  const std::string json = R"({"name": "t", "description": )" + std::string(depth, '[') +
                           std::string(depth, ']') + R"(, "root": {}})";
  try {
    parse_topology(json);
    ADD_FAILURE() << "accepted";
  } catch (const TopologyError& e) {
    EXPECT_EQ(e.where(), "description");
    EXPECT_NE(std::string(e.what()).find("must be a string, got array"), std::string::npos)
        << e.what();
  }
}

TEST(TopologyParse, UnreadableFilesSaySo) {
  const std::string missing = "/nonexistent/topology.json";
  try {
    load_topology(missing);
    ADD_FAILURE() << "accepted";
  } catch (const TopologyError& e) {
    EXPECT_EQ(e.where(), missing);
    EXPECT_NE(std::string(e.what()).find("cannot open"), std::string::npos) << e.what();
  }
  const std::string directory = std::filesystem::temp_directory_path().string();
  try {
    load_topology(directory);
    ADD_FAILURE() << "accepted";
  } catch (const TopologyError& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
  }
}

// A regular file is read at its size, anything else as it comes: a file and a FIFO carrying the
// same text give the same tree.
TEST(TopologyParse, FilesAndPipesReadAlike) {
  const auto dir = std::filesystem::temp_directory_path() / "flexplan_topology_read_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "t.json").string(), fifo = (dir / "t.fifo").string();
  std::ofstream(file) << kExample;
  const Topology from_file = load_topology(file);
  EXPECT_EQ(from_file.num_learners(), 5);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] { std::ofstream(fifo) << kExample; });
  const Topology from_pipe = load_topology(fifo);
  writer.join();
  EXPECT_EQ(from_pipe.hash(), from_file.hash());
  EXPECT_EQ(full_names_of_learners(from_pipe), full_names_of_learners(from_file));
  std::filesystem::remove_all(dir);
}

TEST(TopologyParse, SyntaxErrorsCarryTheFileName) {
  const auto path = std::filesystem::temp_directory_path() / "flexplan_topology_parse_test.json";
  std::ofstream(path) << "{\"name\": \"t\",\n\"root\": [,]}\n";
  try {
    load_topology(path.string());
    ADD_FAILURE() << "accepted";
  } catch (const TopologyError& e) {
    EXPECT_EQ(e.where(), path.string() + ":2:10") << e.what();
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace flexplan
