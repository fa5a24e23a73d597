// `flexplan topo show`: what it prints, its --help, and exit code 2 with the located message
// for bad topologies.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "topology/topology.hpp"
#include "tests/unit/cli_run.hpp"

namespace flexplan {
namespace {

const std::string kDir = FLEXPLAN_SOURCE_DIR "/topologies/";

using testing::CliRun;
using testing::run_flexplan;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A file in the temp directory holding `text`, removed at the end of the test.
class TempFile {
 public:
  explicit TempFile(const std::string& text)
      : path_(std::filesystem::temp_directory_path() /
              ("flexplan_topology_cli_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
               "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".json")) {
    std::ofstream(path_) << text;
  }
  ~TempFile() { std::filesystem::remove(path_); }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

TEST(TopologyCli, ShowPrintsLevelsTreeBottleneckAndSymmetry) {
  const std::string file = kDir + "two-machines-2+3.json";
  const CliRun run = run_flexplan("topo show '" + file + "'");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "5 learners, 8 nodes, 2 levels, asymmetric")) << run.output;
  EXPECT_TRUE(contains(run.output, "hash " + load_topology(file).hash_hex())) << run.output;
  EXPECT_TRUE(contains(run.output, "|-- m0  1 Gbit/s, 50 us  (2 learners)")) << run.output;
  EXPECT_TRUE(contains(run.output, "`-- gpu[0..2] x3  10 GB/s, 5 us  ranks 2..4")) << run.output;
  EXPECT_TRUE(contains(run.output, "bottleneck: 1 Gbit/s on 2 links")) << run.output;
  EXPECT_TRUE(contains(run.output, "symmetric: no (at depth 1, switch/m0 has 2 children but "
                                   "switch/m1 has 3 children)"))
      << run.output;
}

TEST(TopologyCli, ShowSaysWhenSymmetric) {
  const CliRun run = run_flexplan("topo show '" + kDir + "cloud-16x8-25gbe.json'");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "128 learners")) << run.output;
  EXPECT_TRUE(contains(run.output, "node[0..15] x16  25 Gbit/s, 25 us  (8 learners each)"))
      << run.output;
  EXPECT_TRUE(contains(run.output, "symmetric: yes")) << run.output;
}

TEST(TopologyCli, LargeTreeFitsAScreen) {
  const CliRun run = run_flexplan("topo show '" + kDir + "large-10k.json'");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "10072 learners")) << run.output;
  EXPECT_TRUE(contains(run.output, "m[0..15] x16")) << run.output;
  EXPECT_LE(std::count(run.output.begin(), run.output.end(), '\n'), 50) << run.output;
}

TEST(TopologyCli, MaxLinesCutsTheTree) {
  const CliRun run = run_flexplan("topo show --max-lines 2 '" + kDir + "asym-3level-a.json'");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "more lines (--max-lines 0 prints all)")) << run.output;
  EXPECT_FALSE(contains(run.output, "-- rack1")) << run.output;
  EXPECT_TRUE(contains(run.output, "bottleneck:")) << "the rest of the report still follows";
}

TEST(TopologyCli, BadTopologyExitsWithCode2AndTheLocation) {
  const TempFile file(R"({"name": "t", "root": {"name": "s", "children": [
    {"name": "a", "link": {"bandwidth": "1 GB/s"}}, {"name": "b", "link": {"bandwidth": "10"}}]}})");
  const CliRun run = run_flexplan("topo show '" + file.path() + "'");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_TRUE(contains(run.output, "root.children[1].link.bandwidth: \"10\" has no unit"))
      << run.output;
}

TEST(TopologyCli, MissingFileAndJsonErrorsExitWithCode2) {
  const CliRun missing = run_flexplan("topo show /nonexistent/t.json");
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_TRUE(contains(missing.output, "/nonexistent/t.json: cannot open")) << missing.output;

  const TempFile broken("{\"name\": \"t\",\n  \"root\": {,}}");
  const CliRun syntax = run_flexplan("topo show '" + broken.path() + "'");
  EXPECT_EQ(syntax.exit_code, 2) << syntax.output;
  EXPECT_TRUE(contains(syntax.output, broken.path() + ":2:12: invalid JSON")) << syntax.output;
}

// Hostile numbers, bytes and names are malformed input like any other: exit 2, located.
TEST(TopologyCli, HostileInputExitsWithCode2AndTheLocation) {
  const std::string two = R"({"name": "a", "link": {"bandwidth": "1 GB/s"}}, {"name": "b", )"
                          R"("link": {"bandwidth": "1 GB/s"}})";
  const TempFile huge_count(R"({"name": "t", "root": {"name": "s", "children": [)" + two +
                            R"(, {"name": "c", "count": 1e400, "link": {"bandwidth": "1 GB/s"}}]}})");
  CliRun run = run_flexplan("topo show '" + huge_count.path() + "'");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_TRUE(contains(run.output, "invalid JSON: number overflow parsing '1e400'")) << run.output;

  const TempFile nul(std::string(R"({"name": "t", "root": {"name": "s", "children": [)") + two +
                     "]}}" + std::string("\0", 1) + "{{{ not json");
  run = run_flexplan("topo show '" + nul.path() + "'");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_TRUE(contains(run.output, "a NUL byte")) << run.output;

  const TempFile newline(R"({"name": "t", "root": {"name": "s", "children": [)"
                         R"({"name": "gpu\n0", "link": {"bandwidth": "1 GB/s"}}, )"
                         R"({"name": "b", "link": {"bandwidth": "1 GB/s"}}]}})");
  run = run_flexplan("topo show '" + newline.path() + "'");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_TRUE(contains(run.output, "root.children[0].name: \"gpu\\n0\" holds the control "
                                   "character U+000A"))
      << run.output;

  const TempFile slow(R"({"name": "t", "root": {"name": "s", "children": [)"
                      R"({"name": "a", "link": {"bandwidth": "1e-320 B/s"}}, )"
                      R"({"name": "b", "link": {"bandwidth": "1 GB/s", "latency": "1e308 s"}}]}})");
  run = run_flexplan("topo show '" + slow.path() + "'");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_TRUE(contains(run.output, "root.children[0].link.bandwidth: \"1e-320 B/s\" is below "
                                   "1 kbit/s"))
      << run.output;
}

TEST(TopologyCli, EverySubcommandHasHelp) {
  const CliRun topo = run_flexplan("topo --help");
  EXPECT_EQ(topo.exit_code, 0) << topo.output;
  EXPECT_TRUE(contains(topo.output, "show")) << topo.output;
  const CliRun show = run_flexplan("topo show --help");
  EXPECT_EQ(show.exit_code, 0) << show.output;
  EXPECT_TRUE(contains(show.output, "TOPOLOGY")) << show.output;
  EXPECT_TRUE(contains(show.output, "--max-lines")) << show.output;
  EXPECT_EQ(run_flexplan("topo").exit_code, 2) << "a subcommand is required";
}

}  // namespace
}  // namespace flexplan
