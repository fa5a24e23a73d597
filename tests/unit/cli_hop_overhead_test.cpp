// Where the commands' hop overhead comes from (cli/cost_options.hpp): --hop-overhead, else the
// topology's "hop_overhead" (as flexplan probe writes it), else the runtime's measured
// constant; plan and predict say which they used, and the figure changes their prices.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

#include "planner/cost_model.hpp"
#include "tests/unit/cli_run.hpp"

namespace flexplan {
namespace {

using testing::run_flexplan;
using CliHopOverhead = testing::ScratchDirTest;

// Two machines of 2 and 3 learners; `field` goes at the top level.
std::string topology_text(const std::string& field) {
  return R"({"name": "h", )" + field + R"( "root": {"name": "s", "children": [
    {"name": "m0", "link": {"bandwidth": "1 Gbit/s", "latency": "50 us"}, "children": [
      {"name": "g", "count": 2, "link": {"bandwidth": "10 GB/s", "latency": "5 us"}}]},
    {"name": "m1", "link": {"bandwidth": "1 Gbit/s", "latency": "50 us"}, "children": [
      {"name": "g", "count": 3, "link": {"bandwidth": "10 GB/s", "latency": "5 us"}}]}]}})";
}

nlohmann::json predict_json(const std::string& topo, const std::string& extra) {
  const auto run = run_flexplan("predict " + topo + " -b 1K -e 1K -a ring --format json" + extra, "2>/dev/null");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  return nlohmann::json::parse(run.output, nullptr, false);
}

double ring_seconds(const nlohmann::json& predicted) { return predicted["records"][0]["seconds"]["ring"].get<double>(); }

TEST_F(CliHopOverhead, CommandLineThenTopologyThenTheConstant) {
  const std::string plain = path("plain.json"), given = path("given.json");
  std::ofstream(plain) << topology_text("");
  std::ofstream(given) << topology_text(R"("hop_overhead": "1 ms",)");

  const auto by_default = predict_json(plain, "");
  EXPECT_DOUBLE_EQ(by_default["hop_overhead_seconds"].get<double>(), kMeasuredHopOverhead);
  EXPECT_EQ(by_default["hop_overhead_from"], "the default");

  const auto from_topology = predict_json(given, "");
  EXPECT_DOUBLE_EQ(from_topology["hop_overhead_seconds"].get<double>(), 1e-3);
  EXPECT_EQ(from_topology["hop_overhead_from"], "the topology");
  // The ring of 5 learners has 8 steps of one hop each: each step pays the overhead.
  EXPECT_NEAR(ring_seconds(from_topology) - ring_seconds(by_default), 8 * (1e-3 - kMeasuredHopOverhead), 1e-6);

  const auto from_option = predict_json(given, " --hop-overhead '2 us'");
  EXPECT_DOUBLE_EQ(from_option["hop_overhead_seconds"].get<double>(), 2e-6);
  EXPECT_EQ(from_option["hop_overhead_from"], "--hop-overhead");
  const auto zero_option = predict_json(given, " --hop-overhead 0s");
  EXPECT_EQ(zero_option["hop_overhead_seconds"].get<double>(), 0.0);

  // predict's text header names the source.
  auto run = run_flexplan("predict " + given + " -b 1K -e 1K -a ring");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("hop overhead 1 ms (from the topology)"), std::string::npos) << run.output;

  // plan: said in its text where not the default (and with -v), and in its JSON.
  run = run_flexplan(given + " -o " + path("plan.bin"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("hop overhead of 1 ms (from the topology)"), std::string::npos) << run.output;
  run = run_flexplan(plain + " -o " + path("plan.bin"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output.find("hop overhead of"), std::string::npos) << run.output;
  run = run_flexplan(plain + " -o " + path("plan.bin") + " -v");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("(from the default)"), std::string::npos) << run.output;
  run = run_flexplan(given + " -o " + path("plan.bin") + " --hop-overhead 3us --format json", "2>/dev/null");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto planned = nlohmann::json::parse(run.output, nullptr, false);
  EXPECT_DOUBLE_EQ(planned["hop_overhead_seconds"].get<double>(), 3e-6);
  EXPECT_EQ(planned["hop_overhead_from"], "--hop-overhead");
}

TEST_F(CliHopOverhead, TopoShowPrintsTheTopologysFigure) {
  const std::string plain = path("plain.json"), given = path("given.json");
  std::ofstream(plain) << topology_text("");
  std::ofstream(given) << topology_text(R"("hop_overhead": "250 us",)");
  auto run = run_flexplan("topo show " + given);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("software cost per hop 250 us"), std::string::npos) << run.output;
  run = run_flexplan("topo show " + plain);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output.find("cost per hop"), std::string::npos) << run.output;

  run = run_flexplan("topo show " + given + " --format json", "2>/dev/null");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(run.output)["hop_overhead_seconds"].get<double>(), 250e-6);
  run = run_flexplan("topo show " + plain + " --format json", "2>/dev/null");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(nlohmann::json::parse(run.output)["hop_overhead_seconds"].is_null());
}

TEST_F(CliHopOverhead, BadFiguresExitTwoNamingTheirSource) {
  const std::string file = path("bad.json");
  for (const char* bad : {R"("slow")", "5", R"("-3 us")", R"("5 s")"}) {
    std::ofstream(file) << topology_text(std::string(R"("hop_overhead": )") + bad + ",");
    for (const std::string command : {"", "predict ", "whatif "}) {
      const auto run = run_flexplan(command + file + (command.empty() ? " -o " + path("plan.bin") : std::string()));
      EXPECT_EQ(run.exit_code, 2) << command << bad << ": " << run.output;
      EXPECT_NE(run.output.find("hop_overhead"), std::string::npos) << command << bad << ": " << run.output;
    }
  }
  std::ofstream(file) << topology_text("");
  for (const char* bad : {"soon", "-1us", "2s"}) {
    const auto run = run_flexplan(file + " -o " + path("plan.bin") + " --hop-overhead " + bad);
    EXPECT_EQ(run.exit_code, 2) << bad << ": " << run.output;
    EXPECT_NE(run.output.find("--hop-overhead"), std::string::npos) << bad << ": " << run.output;
  }
}

}  // namespace
}  // namespace flexplan
