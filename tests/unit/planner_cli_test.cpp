// The planning commands end to end: `flexplan TOPOLOGY.json -o plan.bin` and `flexplan predict`,
// run as a user would, with their exit codes and the errors for bad input; --help everywhere.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "ir/plan_binary.hpp"
#include "planner/algorithm_table.hpp"
#include "planner/cost_model.hpp"
#include "planner/floor.hpp"
#include "planner/sparse_cost.hpp"
#include "topology/topology.hpp"
#include "tests/unit/cli_run.hpp"

namespace flexplan {
namespace {

using testing::run_flexplan;

std::string topology(const std::string& name) {
  return std::string(FLEXPLAN_SOURCE_DIR) + "/topologies/" + name + ".json";
}

using PlannerCli = testing::ScratchDirTest;

TEST_F(PlannerCli, PlansAndWritesAVerifiedPlan) {
  const auto out = path("plan.bin");
  const auto run = run_flexplan(topology("two-machines-2+3") + " -o " + out);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("topology two-machines-2+3 (5 learners, 2 levels, asymmetric)"),
            std::string::npos) << run.output;
  EXPECT_NE(run.output.find("flexreduce"), std::string::npos);
  EXPECT_NE(run.output.find("vs ring"), std::string::npos);
  EXPECT_NE(run.output.find("/floor"), std::string::npos);
  EXPECT_NE(run.output.find("Eq. 12 bound 3"), std::string::npos) << run.output;
  const auto plan = ir::read_plan_file(out);  // verifies
  EXPECT_EQ(plan.world_size, 5);
  EXPECT_EQ(plan.topology_name, "two-machines-2+3");
  ASSERT_FALSE(plan.schedules.empty());
}

TEST_F(PlannerCli, ForcedAlgorithmAndTheBlueConnectFallbackNote) {
  const auto out = path("plan.bin");
  const auto run =
      run_flexplan(topology("two-machines-2+3") + " -o " + out + " --algorithms blueconnect");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("fell back to the ring"), std::string::npos) << run.output;
  const auto plan = ir::read_plan_file(out);
  ASSERT_GT(plan.schedules.size(), 1u);  // the other collectives, raced (no row of theirs is named)
  EXPECT_EQ(plan.schedules[0].algorithm, "blueconnect");
  EXPECT_EQ(plan.schedules[0].collective, ir::Collective::AllReduce);
  EXPECT_FALSE(plan.schedules[0].max_bytes);  // the one all-reduce schedule
  EXPECT_NE(plan.schedules[1].collective, ir::Collective::AllReduce);
}

std::string algorithm_at(const ir::Plan& plan, uint64_t bytes) {
  for (const auto& schedule : plan.schedules)
    if (schedule.min_bytes <= bytes && (!schedule.max_bytes || bytes < *schedule.max_bytes))
      return schedule.algorithm;
  return "none";
}

// Two learners on one host (bench/flexbench/loopback-2.json, which gives the host's reduction
// rate, 6 GB/s): with reductions modelled, slower than the 10 GB/s links, a 64 MiB all-reduce
// goes to a pipeline that overlaps them with the transfers (FlexReduce's halves priced per rank,
// the two switch trees' halves per slice) and small ones stay with recursive doubling; without
// them (--reduce-bandwidth none), recursive doubling serves every size up to about 100 TB. The
// flag overrides the topology's rate.
TEST_F(PlannerCli, ReduceBandwidthMovesLargeMessagesOffRecursiveDoubling) {
  const std::string host = std::string(FLEXPLAN_SOURCE_DIR) + "/bench/flexbench/loopback-2.json";
  const auto out = path("plan.bin");
  auto run = run_flexplan(host + " -o " + out);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto plan = ir::read_plan_file(out);
  EXPECT_NE(algorithm_at(plan, 64 << 20).find('@'), std::string::npos) << algorithm_at(plan, 64 << 20);
  EXPECT_NE(algorithm_at(plan, 64 << 20).rfind("recursive-doubling", 0), 0u) << algorithm_at(plan, 64 << 20);
  EXPECT_EQ(algorithm_at(plan, 1024), "recursive-doubling");
  run = run_flexplan(host + " -o " + out + " --reduce-bandwidth none");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(algorithm_at(ir::read_plan_file(out), 64 << 20), "recursive-doubling");
  run = run_flexplan(host + " -o " + out + " --reduce-bandwidth '100 Tbit/s'");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(algorithm_at(ir::read_plan_file(out), 64 << 20), "recursive-doubling");
  run = run_flexplan(host + " -o " + out + " --reduce-bandwidth '0 GB/s'");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.output.find("--reduce-bandwidth"), std::string::npos) << run.output;
  run = run_flexplan("predict " + host + " -b 1M -e 1M --format json");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("\"reduce_bytes_per_second\": 6000000000"), std::string::npos)
      << run.output;
  run = run_flexplan("predict " + host + " -b 1M -e 1M --reduce-bandwidth '3 GB/s' --format json");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("\"reduce_bytes_per_second\": 3000000000"), std::string::npos)
      << run.output;
}

// A bad "reduce_bandwidth" in a topology is the topology's error: exit 2, naming the field.
TEST_F(PlannerCli, BadTopologyReductionRateIsRefused) {
  const std::string file = path("host.json");
  for (const char* bad : {"\"fast\"", "6", "\"0 GB/s\"", "\"1e400 GB/s\""}) {
    std::ofstream(file) << R"({"name": "h", "reduce_bandwidth": )" << bad
                        << R"(, "root": {"name": "m", "children": [{"name": "g", "count": 2,
                              "link": {"bandwidth": "10 GB/s"}}]}})";
    const auto run = run_flexplan(file + " -o " + path("plan.bin"));
    EXPECT_EQ(run.exit_code, 2) << bad << ": " << run.output;
    EXPECT_NE(run.output.find("reduce_bandwidth"), std::string::npos) << run.output;
  }
}

TEST_F(PlannerCli, BadInputExitsWithTwoAndSaysWhy) {
  const auto out = path("plan.bin");
  auto run = run_flexplan(topology("two-machines-2+3") + " -o " + out + " --algorithms ring,bogus");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.output.find("bogus"), std::string::npos) << run.output;

  run = run_flexplan(path("missing.json") + " -o " + out);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.output.find("missing.json"), std::string::npos) << run.output;

  run = run_flexplan(topology("two-machines-2+3") + " -o " + out + " --hop-overhead fast");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.output.find("fast"), std::string::npos) << run.output;

  run = run_flexplan("");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.output.find("TOPOLOGY"), std::string::npos) << run.output;
  EXPECT_FALSE(std::filesystem::exists(out));
}

// --slice-progress (cli/cost_options.hpp) on paper-3m-10 (three machines of 3, 3 and 4 learners):
// the double tree in 64 slices, priced per slice as the runtime runs it with its steps
// overlapping, takes 1.5 ms at 1 MiB, and 8.7 ms priced per rank (step by step: every slice's step
// waits for the rank's 64); predict's plan column changes with it (priced per slice, the plan
// is that pipelined tree or cheaper). Without the flag both follow the library's default; a bad value
// exits 2 naming the flag and the value.
TEST_F(PlannerCli, SliceProgressChangesAPipelinedTreeRowsPrice) {
  const std::string topo = topology("paper-3m-10");
  const std::string row = "double-tree@64";
  const auto predict = [&](const std::string& flag, double& plan_seconds, std::string& plan_row) {
    const auto run = run_flexplan("predict " + topo + " -b 1M -e 1M -a " + row + " --format json " + flag);
    EXPECT_EQ(run.exit_code, 0) << run.output;
    const auto doc = nlohmann::json::parse(run.output);
    const auto& record = doc.at("records").at(0);
    plan_seconds = record.at("plan").at("seconds").get<double>();
    plan_row = record.at("plan").at("algorithm").get<std::string>();
    EXPECT_EQ(doc.at("slice_progress").get<std::string>(),
              flag.empty() ? (CostParams{}.slice_progress == SliceProgress::PerSlice ? "slice" : "rank")
                           : flag.substr(flag.rfind(' ') + 1));
    return record.at("seconds").at(row).get<double>();
  };
  double plan_rank = 0, plan_slice = 0, plan_default = 0;
  std::string row_rank, row_slice, row_default;
  const double per_rank = predict("--slice-progress rank", plan_rank, row_rank);
  const double per_slice = predict("--slice-progress slice", plan_slice, row_slice);
  const double by_default = predict("", plan_default, row_default);
  EXPECT_NEAR(per_rank, 8.68e-3, 0.1e-3);
  EXPECT_NEAR(per_slice, 1.50e-3, 0.05e-3);
  // Per slice the plan is that tree or one priced cheaper still (the fitted and rotated switch
  // trees, since 2026-12-01).
  EXPECT_LE(plan_slice, per_slice);
  EXPECT_NE(row_rank, row);
  EXPECT_GT(plan_rank, plan_slice);
  const bool slice_default = CostParams{}.slice_progress == SliceProgress::PerSlice;
  EXPECT_EQ(by_default, slice_default ? per_slice : per_rank);
  EXPECT_EQ(row_default, slice_default ? row_slice : row_rank);

  // The plan command prices the forced row the same way.
  const auto plan = run_flexplan(topo + " -o " + path("plan.bin") + " --collectives allreduce -a " + row +
                                 " --slice-progress slice --format json");
  ASSERT_EQ(plan.exit_code, 0) << plan.output;
  const auto planned = nlohmann::json::parse(plan.output).at("allreduce").at("candidates").at(0);
  EXPECT_EQ(planned.at("seconds").at("1048576").get<double>(), per_slice) << plan.output;

  for (const auto& command : {"predict " + topo + " -b 1M -e 1M", topo + " -o " + path("bad.bin")}) {
    const auto bad = run_flexplan(command + " --slice-progress step");
    EXPECT_EQ(bad.exit_code, 2) << bad.output;
    EXPECT_NE(bad.output.find("flexplan: error: --slice-progress: \"step\" is not rank or slice"),
              std::string::npos) << bad.output;
  }
}

TEST_F(PlannerCli, PredictPrintsOneRowPerSize) {
  const auto run = run_flexplan(
      "predict " + topology("two-machines-2+3") + " -b 64K -e 1M -f 2 -t float64", "2>&1",
      dir_.string());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::istringstream lines(run.output);
  std::vector<std::string> rows;
  for (std::string line; std::getline(lines, line);)
    if (!line.empty() && line[0] != '#') rows.push_back(line);
  // One row per size (64K, 128K, 256K, 512K, 1M), then the time by algorithm, one row each.
  ASSERT_GE(rows.size(), 5u) << run.output;
  std::istringstream first(rows[0]);
  uint64_t size = 0, count = 0;
  first >> size >> count;
  EXPECT_EQ(size, 65536u);
  EXPECT_EQ(count, 65536u / 8);
  std::istringstream fifth(rows[4]);
  fifth >> size;
  EXPECT_EQ(size, 1u << 20) << run.output;
  // A size's row: the schedule the plan command writes, its time (us), algbw and busbw, its
  // time over the floor, and the floor (us).
  std::istringstream row(rows[0]);
  std::vector<std::string> words;
  for (std::string word; row >> word;) words.push_back(word);
  ASSERT_EQ(words.size(), 8u) << rows[0];
  const std::string written = words[2];
  const double written_us = std::stod(words[3]);
  const double over_floor = std::stod(words[6]);
  const double floor_us = std::stod(words[7]);
  EXPECT_NO_THROW(find_algorithm(written)) << rows[0];
  EXPECT_GE(written_us, floor_us) << rows[0];
  EXPECT_GE(over_floor, 1.0) << rows[0];
  EXPECT_NEAR(over_floor, written_us / floor_us, 0.006) << rows[0];
  const auto topo = load_topology(topology("two-machines-2+3"));
  EXPECT_NEAR(floor_us, cost_floor(topo).at(65536.0) * 1e6, 0.01) << rows[0];
  // Every algorithm's row, the fastest marked at each size.
  size_t marks = 0;
  for (size_t r = 5; r < rows.size(); ++r) marks += std::count(rows[r].begin(), rows[r].end(), '*');
  EXPECT_EQ(marks, 5u) << run.output;
  for (const char* name : {"flexreduce", "ring", "blueconnect", "hierarchical", "busbw", "/floor"})
    EXPECT_NE(run.output.find(name), std::string::npos) << name;
  EXPECT_FALSE(std::filesystem::exists(path("plan.bin"))) << "predict must not run the main job";
}

// --collective: the collective's own algorithms, its floor, and the schedule the plan command
// writes for each size, which is the cheapest priced.
TEST_F(PlannerCli, PredictTakesACollective) {
  const auto run = run_flexplan("predict " + topology("two-machines-2+3") +
                                    " -b 8 -e 256M -f 8 --collective broadcast --root 3 --format json",
                                "2>/dev/null");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto json = nlohmann::json::parse(run.output);
  EXPECT_EQ(json["collective"], "broadcast");
  EXPECT_EQ(json["root"], 3);
  for (const auto& record : json["records"]) {
    const std::string written = record["plan"]["algorithm"];
    const double seconds = record["plan"]["seconds"];
    EXPECT_GE(seconds, record["floor_seconds"].get<double>() * (1 - 1e-9));
    if (written.find('@') == std::string::npos) {  // a pipelined variant is not in the table
      EXPECT_NEAR(seconds, record["seconds"][written].get<double>(), 1e-12);
    }
    EXPECT_LE(seconds, record["best_seconds"].get<double>() * (1 + 1e-9));
  }
  const auto bad = run_flexplan("predict " + topology("two-machines-2+3") +
                                    " --collective allgather -a chain",
                                "2>&1");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("unknown allgather algorithm 'chain'"), std::string::npos) << bad.output;
  const auto root = run_flexplan("predict " + topology("two-machines-2+3") +
                                     " --collective reduce --root 5",
                                 "2>&1");
  EXPECT_EQ(root.exit_code, 2) << root.output;
  EXPECT_NE(root.output.find("--root 5 is not among the 5 learners"), std::string::npos) << root.output;
}

// By default (every collective) one that cannot be built at this size is left out with a
// warning and the plan is written; named with --collectives, it fails the command (exit 4).
// Here the all-gather rows are narrowed to the ring, whose P (P - 1) ops on 3,000 learners
// pass the limits.
TEST_F(PlannerCli, ACollectiveBeyondTheLimitsIsLeftOutByDefault) {
  const std::string topo = path("flat-3000.json"), plan = path("flat.bin");
  std::ofstream(topo) << R"({"name": "flat-3000", "root": {"name": "s", "children": [)"
                      << R"({"name": "g", "count": 3000, "link": {"bandwidth": "100 Gbit/s"}}]}})";
  const auto run = run_flexplan(topo + " -o " + plan + " -a rd-leader,ring --format json", "2>&1 >/dev/null");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("flexplan: warning: not planned, allgather: no allgather algorithm can be built"),
            std::string::npos) << run.output;
  EXPECT_NE(run.output.find("not planned, reduce_scatter:"), std::string::npos) << run.output;
  const auto loaded = ir::read_plan_file(plan);
  bool broadcast = false;
  for (const auto& schedule : loaded.schedules) {
    EXPECT_NE(schedule.collective, ir::Collective::AllGather);
    EXPECT_NE(schedule.collective, ir::Collective::ReduceScatter);
    broadcast = broadcast || schedule.collective == ir::Collective::Broadcast;
  }
  EXPECT_TRUE(broadcast);
  const auto json = run_flexplan(topo + " -o " + plan + " -a rd-leader,ring --format json", "2>/dev/null");
  ASSERT_EQ(json.exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(json.output)["collectives_left_out"].size(), 2u) << json.output;
  const auto named = run_flexplan(topo + " -o " + plan + " -a rd-leader,ring --collectives allreduce,allgather", "2>&1");
  EXPECT_EQ(named.exit_code, 4) << named.output;
  EXPECT_NE(named.output.find("error: no allgather algorithm can be built"), std::string::npos) << named.output;
}

// The plan command writes the collectives asked for, each verified, and says so.
TEST_F(PlannerCli, PlanWritesTheCollectivesAskedFor) {
  const auto run = run_flexplan("" + topology("two-machines-2+3") + " -o " + path("all.bin") +
                                    " --collectives allreduce,allgather,reduce_scatter,broadcast,reduce"
                                    " --roots 0,2",
                                "2>&1");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // One line each by default, their tables with --verbose.
  for (const char* line : {"\n  allgather            ", "\n  reduce_scatter       ",
                           "\n  broadcast (root 2)   ", "\n  reduce (root 0)      "})
    EXPECT_NE(run.output.find(line), std::string::npos) << line << "\n" << run.output;
  const auto verbose = run_flexplan("" + topology("two-machines-2+3") + " -o " + path("all.bin") +
                                        " --roots 0,2 --verbose",
                                    "2>&1");
  ASSERT_EQ(verbose.exit_code, 0) << verbose.output;
  for (const char* line : {"allgather, by message size:", "reduce_scatter, by message size:",
                           "broadcast (root 2), by message size:", "reduce (root 0), by message size:"})
    EXPECT_NE(verbose.output.find(line), std::string::npos) << line << "\n" << verbose.output;
  const auto verify = run_flexplan("verify " + path("all.bin"), "2>&1");
  EXPECT_EQ(verify.exit_code, 0) << verify.output;
  for (const char* what : {"(allgather (equal shards))", "(reduce_scatter (equal shards))",
                           "(broadcast (root 2))", "(reduce (root 0))"})
    EXPECT_NE(verify.output.find(what), std::string::npos) << what << "\n" << verify.output;
  const auto bad = run_flexplan("" + topology("two-machines-2+3") + " -o " +
                                    path("bad.bin") + " --collectives broadcast --roots 9",
                                "2>&1");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("root 9 is not among the 5 learners"), std::string::npos) << bad.output;
}

// --format json carries the text table's records: per size every algorithm's time, the best,
// the floor and, with --sparse, the sparse cost at each of --densities.
TEST_F(PlannerCli, PredictFormatJsonHasTheSameRecords) {
  const auto topo_path = topology("two-machines-2+3");
  const auto run = run_flexplan("predict " + topo_path +
                                " -b 1M -e 4M -a flexreduce,ring --sparse --densities 0.01,0.5 "
                                "--mstopk-ns 2 --format json",
                                "2>/dev/null");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto doc = nlohmann::json::parse(run.output);
  EXPECT_EQ(doc["format"], "flexplan-predict");
  EXPECT_EQ(doc["learners"], 5);
  EXPECT_EQ(doc["mstopk_ns_per_element"], 2.0);
  const auto topo = load_topology(topo_path);
  ASSERT_EQ(doc["records"].size(), 3u);  // 1M, 2M, 4M
  for (const auto& record : doc["records"]) {
    const double bytes = record["bytes"].get<double>();
    const double flexreduce = record["seconds"]["flexreduce"].get<double>();
    const double ring = record["seconds"]["ring"].get<double>();
    EXPECT_EQ(record["best"], flexreduce <= ring ? "flexreduce" : "ring");
    EXPECT_DOUBLE_EQ(record["best_seconds"].get<double>(), std::min(flexreduce, ring));
    EXPECT_DOUBLE_EQ(record["floor_seconds"].get<double>(), cost_floor(topo).at(bytes));
    ASSERT_EQ(record["sparse"].size(), 2u);
    SparseCostParams sparse;
    sparse.mstopk_seconds_per_element = 2e-9;
    for (int i = 0; i < 2; ++i) {
      const double density = i == 0 ? 0.01 : 0.5;
      EXPECT_EQ(record["sparse"][i]["density"], density);
      EXPECT_DOUBLE_EQ(record["sparse"][i]["seconds"].get<double>(),
                       sparse_allreduce_cost(topo, bytes, 4, density,
                                             CostParams{.hop_overhead = kMeasuredHopOverhead}, sparse)
                           .total());  // the commands price with the measured overhead
    }
    // Sparse at density 0.01 costs less than at 0.5: the break-even lies between or beyond.
    EXPECT_LT(record["sparse"][0]["seconds"].get<double>(), record["sparse"][1]["seconds"].get<double>());
  }
  for (const char* bad : {" --densities 0", " --densities 2", " --format xml"}) {
    const auto rejected = run_flexplan("predict " + topo_path + " --sparse" + bad);
    EXPECT_EQ(rejected.exit_code, 2) << bad << "\n" << rejected.output;
  }
}

TEST_F(PlannerCli, PredictRejectsBadSweeps) {
  const auto topo = topology("two-machines-2+3");
  const std::pair<std::string, std::string> cases[] = {
      {" -f 1", "stepfactor"},  {" -b 1M -e 64K", "maxbytes"}, {" -b 12Q", "'12Q'"},
      {" -t complex", "'complex'"}, {" -a nope", "nope"}};
  for (const auto& [args, named] : cases) {
    const auto run = run_flexplan("predict " + topo + args);
    EXPECT_EQ(run.exit_code, 2) << args << "\n" << run.output;
    EXPECT_NE(run.output.find(named), std::string::npos) << args << "\n" << run.output;
  }
}

// The main job and the plan commands answer --help with their usage and options, and exit 0
// (`topo` and `topo show`: TopologyCli.EverySubcommandHasHelp).
TEST(FlexplanCli, EveryCommandHasHelp) {
  const std::pair<std::string, std::string> commands[] = {{"", "--algorithms"},
                                                          {"predict", "--stepfactor"},
                                                          {"inspect", "--format"},
                                                          {"verify", "PLAN"}};
  for (const auto& [command, option] : commands) {
    const auto run = run_flexplan(command + " --help");
    EXPECT_EQ(run.exit_code, 0) << command << "\n" << run.output;
    EXPECT_NE(run.output.find("Usage:"), std::string::npos) << command << "\n" << run.output;
    EXPECT_NE(run.output.find(option), std::string::npos) << command << "\n" << run.output;
  }
}

}  // namespace
}  // namespace flexplan
