// What every command shares (README, "The commands"): --format json that parses and holds the
// key fields, CLI11's errors with the `flexplan: error:` prefix, the exit codes, one set of flag
// names and one rule for sizes with the older spellings warned about; and the plan command's
// short default output.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/unit/cli_run.hpp"

namespace flexplan {
namespace {

using testing::run_flexplan;

std::string topology(const std::string& name) {
  return std::string(FLEXPLAN_SOURCE_DIR) + "/topologies/" + name + ".json";
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

class CliCommon : public testing::ScratchDirTest {
 protected:
  // Two learners on two machines: the planner puts a range boundary tens of TiB up.
  std::string two_learners() {
    const std::string file = path("two.json");
    std::ofstream(file) << R"({"name": "two-machines-1+1", "root": {"name": "sw", "children": [
      {"name": "m", "count": 2, "link": {"bandwidth": "25 Gbit/s", "latency": "10 us"},
       "children": [{"name": "gpu", "link": {"bandwidth": "100 GB/s", "latency": "1 us"}}]}]}})";
    return file;
  }
  // stdout alone, parsed; fails the test when it is no JSON.
  nlohmann::json json_of(const std::string& arguments, int expected_code = 0) {
    const auto run = run_flexplan(arguments, "2>/dev/null");
    EXPECT_EQ(run.exit_code, expected_code) << arguments << "\n" << run.output;
    try {
      return nlohmann::json::parse(run.output);
    } catch (const nlohmann::json::exception& e) {
      ADD_FAILURE() << arguments << ": " << e.what() << "\n" << run.output;
      return {};
    }
  }
};

TEST_F(CliCommon, EveryCommandPrintsJson) {
  const std::string topo = topology("two-machines-2+3"), plan = path("plan.bin");
  auto doc = json_of(topo + " -o " + plan + " --format json");
  EXPECT_EQ(doc["format"], "flexplan-plan");
  EXPECT_EQ(doc["topology"]["learners"], 5);
  ASSERT_FALSE(doc["allreduce"]["ranges"].empty());
  EXPECT_EQ(doc["allreduce"]["ranges"][0]["min_bytes"], 0);
  EXPECT_TRUE(doc["allreduce"]["ranges"].back()["max_bytes"].is_null());
  EXPECT_EQ(doc["allreduce"]["predictions"].size(), 5u);
  EXPECT_GT(doc["allreduce"]["candidates"].size(), doc["allreduce"]["ranges"].size());
  // Every collective by default: the all-reduce's schedules are its ranges, the others'
  // ranges are under "collectives".
  size_t all_reduce_schedules = 0, other_ranges = 0;
  for (const auto& schedule : doc["schedules"]) all_reduce_schedules += schedule["collective"] == "allreduce";
  EXPECT_EQ(all_reduce_schedules, doc["allreduce"]["ranges"].size());
  ASSERT_EQ(doc["collectives"].size(), 4u);  // reduce_scatter, allgather, broadcast and reduce from root 0
  for (const auto& collective : doc["collectives"]) other_ranges += collective["ranges"].size();
  EXPECT_EQ(all_reduce_schedules + other_ranges, doc["schedules"].size());
  // The predicted time at each size is the chosen candidate's there.
  for (const auto& p : doc["allreduce"]["predictions"]) {
    bool found = false;
    for (const auto& c : doc["allreduce"]["candidates"])
      if (c["algorithm"] == p["algorithm"]) {
        found = true;
        EXPECT_TRUE(c["chosen"].get<bool>()) << p;
        EXPECT_DOUBLE_EQ(c["seconds"][std::to_string(p["bytes"].get<uint64_t>())].get<double>(),
                         p["seconds"].get<double>());
      }
    EXPECT_TRUE(found) << p;
  }

  doc = json_of("topo show " + topo + " --format json");
  EXPECT_EQ(doc["format"], "flexplan-topology");
  EXPECT_EQ(doc["learners"], 5);
  EXPECT_EQ(doc["symmetric"], false);
  EXPECT_TRUE(doc["asymmetry"].is_string());
  EXPECT_DOUBLE_EQ(doc["bottleneck"]["bytes_per_second"].get<double>(), 1.25e8);  // 1 Gbit/s
  EXPECT_EQ(doc["bottleneck"]["uplinks_of"].size(), 2u);
  EXPECT_EQ(doc["level_summary"].back()["level"], "learners");

  doc = json_of("predict " + topo + " -b 1M -e 4M --format json");
  EXPECT_EQ(doc["format"], "flexplan-predict");
  EXPECT_EQ(doc["records"].size(), 3u);

  doc = json_of("whatif " + topo + " machines.bandwidth=1Gbit/s,10Gbit/s -a ring,flexreduce -b 1M -e 16M "
                "--no-advice -q --format json");
  EXPECT_EQ(doc["points"].size(), 2u) << doc.dump().substr(0, 400);

  doc = json_of("verify " + plan + " --format json");
  EXPECT_EQ(doc["format"], "flexplan-verify");
  EXPECT_EQ(doc["ok"], true);
  EXPECT_EQ(doc["ranks"], 5);
  ASSERT_FALSE(doc["schedules"].empty());
  EXPECT_EQ(doc["schedules"][0]["ok"], true);
  EXPECT_GT(doc["schedules"][0]["ops"].get<int>(), 0);

  doc = json_of("inspect " + plan + " --format json");
  EXPECT_EQ(doc["world_size"], 5);

  // topo import writes the topology; its report of sources is the JSON.
  doc = json_of("topo import --hosts 'n[1-2]' --learners 2 --allow-defaults -o " + path("imported.json") +
                " --format json");
  EXPECT_EQ(doc["format"], "flexplan-topo-import");
  EXPECT_EQ(doc["machines"], 2);
  EXPECT_EQ(doc["learners"], 4);
  EXPECT_GT(doc["defaults"].get<int>(), 0);
  ASSERT_FALSE(doc["links"].empty());
  EXPECT_TRUE(doc["links"][0]["bandwidth_source"].is_string());
  EXPECT_TRUE(std::filesystem::exists(path("imported.json")));

  // probe --compare of two files: a row per link.
  doc = json_of("probe --compare " + topo + " " + topo + " --format json");
  EXPECT_EQ(doc["format"], "flexplan-probe-compare");
  EXPECT_EQ(doc["links_off"], 0);
  EXPECT_EQ(doc["links"].size(), 7u);  // 2 machines' and 5 learners' uplinks
  const auto measuring = run_flexplan("probe --format json -o " + path("probed.json"));
  EXPECT_EQ(measuring.exit_code, 2) << measuring.output;
  EXPECT_NE(measuring.output.find("--format applies to --compare with two files"), std::string::npos) << measuring.output;

  for (const char* command : {"verify", "inspect", "topo show", "predict"}) {
    const auto bad = run_flexplan(std::string(command) + " " + plan + " --format yaml");
    EXPECT_EQ(bad.exit_code, 2) << command << "\n" << bad.output;
  }
}

// CLI11's own errors read like every other: the prefix, exit 2.
TEST_F(CliCommon, ArgumentErrorsCarryThePrefix) {
  for (const char* arguments : {"predict", "--no-such-flag", "verify", "predict x.json --nope",
                                "codegen p.bin --target png -o x", "predict x.json -f two"}) {
    const auto run = run_flexplan(arguments);
    EXPECT_EQ(run.exit_code, 2) << arguments << "\n" << run.output;
    EXPECT_EQ(run.output.rfind("flexplan: error: ", 0), 0u) << arguments << "\n" << run.output;
  }
}

// A forced algorithm that does not suit the tree is the user's input to change: exit 2, not 1.
TEST_F(CliCommon, UnsuitableForcedAlgorithmExitsTwo) {
  const auto run = run_flexplan(topology("two-machines-2+3") + " -o " + path("p.bin") + " -a torus-2d");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("flexplan: error: algorithm 'torus-2d' does not suit"), std::string::npos)
      << run.output;
}

// Sizes by the one rule: fractions, a space before the unit, and "MB" read as MiB with a warning.
TEST_F(CliCommon, SizesFollowOneRule) {
  const std::string topo = topology("two-machines-2+3");
  auto run = run_flexplan("predict " + topo + " -b 1.5M -e '6 M' --format json", "2>&1");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto doc = nlohmann::json::parse(run.output);
  ASSERT_EQ(doc["records"].size(), 3u);
  EXPECT_EQ(doc["records"][0]["bytes"], 1572864);
  EXPECT_EQ(doc["records"][2]["bytes"], 6291456);

  run = run_flexplan("predict " + topo + " -b 16MB -e 16M --format json", "2>&1 >/dev/null");
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_NE(run.output.find("flexplan: warning: -b/--minbytes: \"16MB\" is read as 16 MiB"),
            std::string::npos) << run.output;

  run = run_flexplan("predict " + topo + " -b 1.3K");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.output.find("not a whole number of bytes"), std::string::npos) << run.output;

  // whatif's older --sizes and codegen's --bytes still work, with a warning.
  run = run_flexplan("whatif " + topo + " --sizes 1M,16MiB -a ring --no-advice -q --format json",
                     "2>&1 >/dev/null");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("flexplan: warning: --sizes is deprecated"), std::string::npos) << run.output;
  doc = json_of("whatif " + topo + " -b 64K -e 1M -f 4 -a ring --no-advice -q --format json");
  EXPECT_EQ(doc["sizes"], nlohmann::json::array({65536, 262144, 1048576})) << doc.dump().substr(0, 300);
  run = run_flexplan("whatif " + topo + " --sizes 1M -b 1M");
  EXPECT_EQ(run.exit_code, 2) << run.output;

  const std::string plan = path("p.bin");
  ASSERT_EQ(run_flexplan(topo + " -o " + plan).exit_code, 0);
  run = run_flexplan("codegen " + plan + " --target trace --topology " + topo + " --bytes 16M -o " +
                     path("t.json"));
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("flexplan: warning: --bytes is deprecated"), std::string::npos) << run.output;
  run = run_flexplan("codegen " + plan + " --target trace --topology " + topo + " -b '16 M' -o " +
                     path("t.json"));
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output.find("warning"), std::string::npos) << run.output;
}

// -a/--algorithms is a comma list everywhere; whatif's "-a flexreduce ring" does not make
// "ring" a variation. -t/--dtype takes the one set of names, the older ones with a warning.
TEST_F(CliCommon, OneSetOfFlagNames) {
  const std::string topo = topology("two-machines-2+3");
  auto run = run_flexplan(topo + " -o " + path("p.bin") + " -a flexreduce,ring --format json", "2>/dev/null");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto printed = nlohmann::json::parse(run.output);
  for (const auto& range : printed["allreduce"]["ranges"])
    EXPECT_TRUE(range["algorithm"] == "flexreduce" || range["algorithm"] == "ring") << range;

  run = run_flexplan("whatif " + topo + " -a flexreduce ring --no-advice -q");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("'ring' is an algorithm, not a variation"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("-a flexreduce,ring"), std::string::npos) << run.output;
  run = run_flexplan("whatif " + topo + " -a flexreduce,ring machines.bandwidth=1Gbit/s -b 1M -e 1M "
                     "--no-advice -q");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  run = run_flexplan("whatif " + topo + " -a nope");
  EXPECT_EQ(run.exit_code, 2) << run.output;

  run = run_flexplan("predict " + topo + " -b 1M -e 1M -t float16", "2>&1");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output.find("warning"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("float16 (2 B)"), std::string::npos) << run.output;
  run = run_flexplan("predict " + topo + " -b 1M -e 1M -t half", "2>&1");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("flexplan: warning: -t/--dtype: data type 'half' is now spelled 'float16'"),
            std::string::npos) << run.output;
}

// By default the plan command prints the chosen ranges and the predictions; --verbose adds the
// candidates, one line each, with no trailing spaces. Ranges beyond any real message (a
// two-learner cluster's boundary tens of TiB up) are not shown by default.
TEST_F(CliCommon, PlanOutputIsShortAndTrue) {
  const std::string topo = topology("two-machines-2+3");
  auto run = run_flexplan(topo + " -o " + path("p.bin"), "2>&1");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_LT(lines_of(run.output).size(), 30u) << run.output;  // every collective planned, the others one line each
  EXPECT_NE(run.output.find("  broadcast (root 0)   "), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("not chosen"), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("T(n)"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("allreduce, by message size:\n  < "), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("  >= "), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("--verbose lists them"), std::string::npos) << run.output;

  run = run_flexplan(topo + " -o " + path("p.bin") + " --verbose", "2>&1");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  size_t left_out = 0, not_chosen = 0;
  for (const std::string& line : lines_of(run.output)) {
    EXPECT_TRUE(line.empty() || line.back() != ' ') << "'" << line << "'";
    if (line.starts_with("  left out:")) {
      ++left_out;
      EXPECT_NE(line.find("cannot win"), std::string::npos) << line;  // the reason on the line
    }
    if (line.starts_with("  not chosen:")) {
      ++not_chosen;
      // "at best 1.04x the plan's time": never below the plan's, which it would have beaten.
      const size_t at = line.find("at best ");
      ASSERT_NE(at, std::string::npos) << line;
      EXPECT_GE(std::stod(line.substr(at + 8)), 1.0) << line;
    }
  }
  EXPECT_GT(left_out, 0u) << run.output;
  EXPECT_GT(not_chosen, 0u) << run.output;

  run = run_flexplan(two_learners() + " -o " + path("two.bin"), "2>&1");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output.find("62.5 TiB"), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("inf"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("  every real size "), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("beyond any real message"), std::string::npos) << run.output;
}

// predict's text fits 100 columns, however many algorithms it shows.
TEST_F(CliCommon, PredictFitsOneHundredColumns) {
  const auto run = run_flexplan("predict " + topology("two-machines-2+3") + " -b 8 -e 1G -f 2 --sparse", "2>&1");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  size_t rows = 0;
  for (const std::string& line : lines_of(run.output)) {
    EXPECT_LE(line.size(), 100u) << line;
    rows += line.starts_with("  ring ");
  }
  EXPECT_EQ(rows, 4u) << run.output;  // 28 sizes in blocks of 7: four blocks, one ring row each
}

}  // namespace
}  // namespace flexplan
