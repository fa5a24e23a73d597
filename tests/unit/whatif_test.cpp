// What-if analysis: variations and their errors, per-link traffic, the step model, the point
// analysis (ring, floor, bottlenecks, advice), reuse across points, and the command's outputs.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_run.hpp"
#include "planner/algorithm_table.hpp"
#include "planner/floor.hpp"
#include "whatif/analysis.hpp"
#include "whatif/link_traffic.hpp"
#include "whatif/records.hpp"
#include "whatif/sweep.hpp"
#include "whatif/variation.hpp"
#include "whatif/workload.hpp"

namespace flexplan::whatif {
namespace {

const std::string kTwoRacks = R"({"name": "racks", "root": {"name": "core", "children": [
  {"name": "rack0", "link": {"bandwidth": "100 Gbit/s", "latency": "2 us"}, "children": [
    {"name": "m{i}", "count": 2, "link": {"bandwidth": "25 Gbit/s", "latency": "10 us"},
     "children": [{"name": "gpu{i}", "count": 4, "link": {"bandwidth": "12 GB/s", "latency": "5 us"}}]}]},
  {"name": "rack1", "link": {"bandwidth": "25 Gbit/s", "latency": "5 us"}, "children": [
    {"name": "m0", "link": {"bandwidth": "10 Gbit/s", "latency": "20 us"},
     "children": [{"name": "gpu{i}", "count": 2, "link": {"bandwidth": "12 GB/s", "latency": "5 us"}}]},
    {"name": "m1", "link": {"bandwidth": "10 Gbit/s", "latency": "20 us"},
     "children": [{"name": "gpu{i}", "count": 3, "link": {"bandwidth": "12 GB/s", "latency": "5 us"}}]}]}]}})";

Topology racks() { return parse_topology(kTwoRacks, "racks"); }

Topology varied(const std::vector<std::string>& texts, size_t point = 0) {
  std::vector<Variation> variations;
  for (const auto& t : texts) variations.push_back(parse_variation(t));
  return to_topology(vary(editable_copy(racks()), variations, grid_point(variations, point)));
}

NodeId node_named(const Topology& topo, const std::string& name) {
  for (NodeId n = 0; n < topo.num_nodes(); ++n)
    if (topo.full_name(n) == name) return n;
  ADD_FAILURE() << "no node " << name;
  return 0;
}

std::string error_of(const std::string& text) {
  try {
    auto v = parse_variation(text);
    varied({text});
  } catch (const VariationError& e) {
    return e.what();
  }
  return "";
}

TEST(WhatifVariation, BadVariationsAreNamed) {
  for (const std::string bad :
       {"machines.bandwidth=25 furlongs", "machine.bandwidth=1Gbit/s", "machines.speed=1Gbit/s",
        "machines.bandwidth", "machines.bandwidth=1Gbit/s,,2Gbit/s", "under:core/nowhere.latency=1us",
        "count:core/rack9/m0=2", "count:core/*/zz*=2", "gpus:*/nothing=4", "count:core/rack0/m0=x",
        "machines.bandwidth*=-2", "gpus:*=0", "replace:core/rack1=/no/such.json"}) {
    const std::string message = error_of(bad);
    EXPECT_NE(message.find("variation '" + bad + "'"), std::string::npos) << bad << ": " << message;
  }
}

TEST(WhatifVariation, SetsAndScalesLinkClasses) {
  const auto topo = varied({"machines.bandwidth=40Gbit/s", "under:core/rack1.latency*=2"});
  EXPECT_DOUBLE_EQ(topo.uplink(node_named(topo, "core/rack0/m1")).bandwidth, 5e9);
  EXPECT_DOUBLE_EQ(topo.uplink(node_named(topo, "core/rack1/m1")).bandwidth, 5e9);
  EXPECT_DOUBLE_EQ(topo.uplink(node_named(topo, "core/rack0")).bandwidth, 12.5e9);  // not a machine
  EXPECT_DOUBLE_EQ(topo.uplink(node_named(topo, "core/rack1/m0")).latency, 40e-6);
  EXPECT_DOUBLE_EQ(topo.uplink(node_named(topo, "core/rack1/m0/gpu1")).latency, 10e-6);
  EXPECT_DOUBLE_EQ(topo.uplink(node_named(topo, "core/rack1")).latency, 5e-6);  // above, not under
  const auto named = varied({"name:*/m1.bandwidth=1Gbit/s", "link:core/rack0.bandwidth*=0.5"});
  EXPECT_DOUBLE_EQ(named.uplink(node_named(named, "core/rack1/m1")).bandwidth, 1.25e8);
  EXPECT_DOUBLE_EQ(named.uplink(node_named(named, "core/rack0/m1")).bandwidth, 1.25e8);
  EXPECT_DOUBLE_EQ(named.uplink(node_named(named, "core/rack1/m0")).bandwidth, 1.25e9);
  EXPECT_DOUBLE_EQ(named.uplink(node_named(named, "core/rack0")).bandwidth, 6.25e9);
}

TEST(WhatifVariation, ChangesTheShape) {
  EXPECT_EQ(racks().num_learners(), 13);
  EXPECT_EQ(varied({"count:core/rack0/m0=4"}).num_learners(), 21);   // two more 4-GPU machines
  EXPECT_EQ(varied({"count:core/rack0/m0=1"}).num_learners(), 9);
  EXPECT_EQ(varied({"count:core/rack1/m0=3"}).num_learners(), 17);  // 2-GPU machines: 1 -> 3
  // A glob: each parent's same-shaped matches as one group (rack0's two 4-GPU machines, rack1's
  // 2-GPU and 3-GPU ones apart), the topmost matches only (not the machines below the racks).
  EXPECT_EQ(varied({"count:core/*/m*=3"}).num_learners(), 27);
  EXPECT_EQ(varied({"count:core/rack*=2"}).num_learners(), 26);
  EXPECT_EQ(varied({"gpus:*=2"}).num_learners(), 8);
  EXPECT_EQ(varied({"gpus:core/rack1/*=8"}).num_learners(), 24);
  // Shape changes come first, so the added machines get the set bandwidth too.
  const auto both = varied({"machines.bandwidth=1Gbit/s", "count:core/rack1/m1=2"});
  EXPECT_DOUBLE_EQ(both.uplink(node_named(both, "core/rack1/m1+1")).bandwidth, 1.25e8);
  // Ranks are renumbered depth-first.
  for (int r = 0; r < both.num_learners(); ++r) EXPECT_EQ(both.rank_of(both.learner_node(r)), r);
}

// 100,000 machines of 100,000 GPUs each would be ten billion nodes: refused before any is made,
// naming the value and the limit (before the check this ran for minutes and exhausted memory).
TEST(WhatifVariation, GrowthPastTheNodeLimitIsRefusedFirst) {
  std::string message;
  try {
    varied({"count:core/rack0/m0=100000", "gpus:core/rack0/*=100000"});
  } catch (const VariationError& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("variation 'gpus:core/rack0/*=100000': value '100000' would grow the "
                         "tree to "),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("more than the limit of 2000000"), std::string::npos) << message;
  // Within the node limit but past the name limit: 100,000 GPUs under each of two machines
  // whose names are 2,000 characters long would take 400 MB of full names.
  const std::string long_name(2000, 'm');
  const std::string text = R"({"name": "long", "root": {"name": "core", "children": [
    {"name": ")" + long_name + R"({i}", "count": 2, "link": {"bandwidth": "25 Gbit/s"},
     "children": [{"name": "gpu{i}", "count": 2, "link": {"bandwidth": "12 GB/s"}}]}]}})";
  const auto variation = parse_variation("gpus:*=100000");
  message.clear();
  try {
    vary(editable_copy(parse_topology(text, "long")), {variation}, grid_point({variation}, 0));
  } catch (const VariationError& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("value '100000' would grow the tree's names and full names to "),
            std::string::npos)
      << message;
  // Many copies, each named apart from its siblings (the naming once took quadratic time).
  const auto wide = varied({"count:core/rack1/m0=20000"});
  EXPECT_EQ(wide.num_learners(), 13 + 19999 * 2);
  EXPECT_NE(node_named(wide, "core/rack1/m0+19999"), 0);
}

TEST(WhatifVariation, ReplacesASubtree) {
  const auto dir = std::filesystem::temp_directory_path() / ("whatif-replace-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto file = (dir / "two.json").string();
  std::ofstream(file) << R"({"name": "x", "root": {"name": "r", "children": [
    {"name": "big", "link": {"bandwidth": "100 Gbit/s", "latency": "1 us"},
     "children": [{"name": "g{i}", "count": 8, "link": {"bandwidth": "150 GB/s", "latency": "1 us"}}]}]}})";
  const auto topo = varied({"replace:core/rack1=" + file});
  std::filesystem::remove_all(dir);
  EXPECT_EQ(topo.num_learners(), 16);
  EXPECT_DOUBLE_EQ(topo.uplink(node_named(topo, "core/rack1")).bandwidth, 25e9 / 8);  // kept
  EXPECT_DOUBLE_EQ(topo.uplink(node_named(topo, "core/rack1/big")).bandwidth, 12.5e9);
}

// A topology's reduction rate survives the editable copy, so the unvaried point is the file's
// topology (same hash) and varied points keep the rate.
TEST(WhatifVariation, KeepsTheReductionRate) {
  std::string text = kTwoRacks;
  text.replace(text.find("\"root\""), 0, "\"reduce_bandwidth\": \"6 GB/s\", ");
  const Topology base = parse_topology(text, "racks");
  ASSERT_DOUBLE_EQ(base.reduce_bandwidth(), 6e9);
  EXPECT_EQ(to_topology(editable_copy(base)).hash(), base.hash());
  const auto variation = parse_variation("count:core/rack0/m0=4");
  const Topology changed = to_topology(vary(editable_copy(base), {variation}, grid_point({variation}, 0)));
  EXPECT_EQ(changed.num_learners(), 21);
  EXPECT_DOUBLE_EQ(changed.reduce_bandwidth(), 6e9);
}

// So does the probe's cost per hop, which is in the hash where a topology gives it.
TEST(WhatifVariation, KeepsTheHopOverhead) {
  std::string text = kTwoRacks;
  text.replace(text.find("\"root\""), 0, "\"hop_overhead\": \"40 us\", ");
  const Topology base = parse_topology(text, "racks");
  ASSERT_TRUE(base.hop_overhead());
  EXPECT_DOUBLE_EQ(*base.hop_overhead(), 40e-6);
  EXPECT_EQ(to_topology(editable_copy(base)).hash(), base.hash());
  const auto variation = parse_variation("count:core/rack0/m0=4");
  const Topology changed = to_topology(vary(editable_copy(base), {variation}, grid_point({variation}, 0)));
  EXPECT_EQ(changed.hop_overhead(), base.hop_overhead());
  EXPECT_FALSE(to_topology(editable_copy(parse_topology(kTwoRacks, "racks"))).hop_overhead());
}

TEST(WhatifVariation, GridVariesTheFirstAxisSlowest) {
  const std::vector<Variation> v{parse_variation("machines.bandwidth=1Gbit/s,2Gbit/s"),
                                 parse_variation("gpus:*=1,2,3")};
  EXPECT_EQ(grid_size(v), 6u);
  EXPECT_EQ(parse_variation("all.latency*=2").axis, "all.latency*");  // reads back as written
  EXPECT_EQ(v[1].axis, "gpus:*");
  EXPECT_EQ(grid_point(v, 4).index, (std::vector<size_t>{1, 1}));
  EXPECT_EQ(varied({"machines.bandwidth=1Gbit/s,2Gbit/s", "gpus:*=1,2,3"}, 5).num_learners(), 12);  // 4 machines x 3
}

TEST(WhatifTraffic, RingClosedFormMatchesItsSchedule) {
  const auto topo = racks();
  const auto walked = schedule_traffic(topo, plan_algorithm(topo, "ring"));
  const auto closed = ring_traffic(topo);
  for (NodeId n = 1; n < topo.num_nodes(); ++n) {
    EXPECT_NEAR(walked.up[n], closed.up[n], 1e-12) << topo.full_name(n);
    EXPECT_NEAR(walked.down[n], closed.down[n], 1e-12) << topo.full_name(n);
  }
  // Every link that separates learners carries at least the floor's n bytes each way.
  for (NodeId n = 1; n < topo.num_nodes(); ++n) {
    if (separates_learners(topo, n)) {
      EXPECT_GE(closed.up[n], 1.0 - 1e-12);
    }
  }
}

// A pipeline held compact (as the what-if pricer builds it) carries what its expansion carries,
// to the last bit: the walk visits the same ops in the same order.
TEST(WhatifTraffic, CompactPipelinesCarryWhatTheirExpansionCarries) {
  const auto topo = racks();
  for (const char* name : {"flexreduce@4", "flexreduce-bw@3", "rabenseifner@2", "hierarchical@8"}) {
    const AlgorithmChoice choice = find_algorithm(name);
    const auto compact = schedule_traffic(topo, choice.build_compact(topo));
    const auto whole = schedule_traffic(topo, choice.build(topo));
    EXPECT_EQ(compact.up, whole.up) << name;
    EXPECT_EQ(compact.down, whole.down) << name;
  }
}

TEST(WhatifStep, OverlapsBucketsWithTheBackwardPass) {
  Workload w;
  w.forward_seconds = 1;
  w.bucket_bytes = 100;
  w.samples_per_learner = 10;
  // Forward order; the backward pass meets c, b, a.
  w.layers = {{"a", 100, 1}, {"b", 60, 1}, {"c", 60, 2}};
  // c+b fill the first bucket at t = 1 + 2 + 1 = 4; a the second at t = 5. All-reduce: 3 s each.
  const auto p = predict_step(w, 4, [](double) { return 3.0; });
  ASSERT_EQ(p.buckets.size(), 2u);
  EXPECT_DOUBLE_EQ(p.buckets[0].ready, 4);
  EXPECT_DOUBLE_EQ(p.buckets[0].end, 7);
  EXPECT_DOUBLE_EQ(p.buckets[1].start, 7);  // waits for the first bucket
  EXPECT_DOUBLE_EQ(p.step, 10);
  EXPECT_DOUBLE_EQ(p.compute, 5);
  EXPECT_DOUBLE_EQ(p.exposed, 5);
  EXPECT_DOUBLE_EQ(p.efficiency, 0.5);
  EXPECT_DOUBLE_EQ(p.samples_per_second, 4.0);
  const auto alone = predict_step(w, 1, [](double) { return 3.0; });
  EXPECT_DOUBLE_EQ(alone.step, 5);
}

TEST(WhatifStep, BundledWorkloadsHaveTheirPapersParameterCounts) {
  const auto params = [](const char* name) { return builtin_workload(name).gradient_bytes() / 4; };
  EXPECT_NEAR(params("resnet50"), 25.6e6, 0.1e6);
  EXPECT_NEAR(params("bert-large"), 340e6, 6e6);    // the paper rounds to 340 M
  EXPECT_NEAR(params("gpt2-xl"), 1542e6, 20e6);     // the paper: 1542 M
}

// A workload file with layers: sizes as numbers, strings and parameter counts; and the file
// --print-workload writes loads back to the same workload.
TEST(WhatifStep, LoadsLayerTablesFromFiles) {
  const std::string path = ::testing::TempDir() + "whatif-layers.json";
  std::ofstream(path) << R"({"name": "file", "forward_seconds": 0.5, "bucket_bytes": "2M",
    "layers": [{"name": "a", "gradient_bytes": "1M", "backward_seconds": 0.25},
               {"name": "b", "gradient_bytes": 3000, "backward_seconds": 0.5},
               {"name": "c", "parameters": 10, "backward_seconds": 0}]})";
  const Workload w = load_workload(path);
  ASSERT_EQ(w.layers.size(), 3u);
  EXPECT_DOUBLE_EQ(w.layers[0].gradient_bytes, 1 << 20);
  EXPECT_DOUBLE_EQ(w.layers[1].gradient_bytes, 3000);
  EXPECT_DOUBLE_EQ(w.layers[2].gradient_bytes, 40);  // fp32 by default
  EXPECT_DOUBLE_EQ(w.layers[1].backward_seconds, 0.5);
  EXPECT_DOUBLE_EQ(w.bucket_bytes, 2 << 20);
  EXPECT_DOUBLE_EQ(w.compute_seconds(), 1.25);

  const Workload resnet = builtin_workload("resnet50");
  std::ofstream(path) << workload_to_json(resnet);
  const Workload again = load_workload(path);
  ASSERT_EQ(again.layers.size(), resnet.layers.size());
  EXPECT_DOUBLE_EQ(again.gradient_bytes(), resnet.gradient_bytes());
  EXPECT_DOUBLE_EQ(again.compute_seconds(), resnet.compute_seconds());

  std::ofstream(path) << R"({"forward_seconds": 0, "layers": [
    {"gradient_bytes": 8, "backward_seconds": 1}, {"gradient_bytes": 8}]})";
  try {
    load_workload(path);
    ADD_FAILURE() << "a layer without backward_seconds was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("layers[1].backward_seconds: missing"), std::string::npos) << e.what();
  }
}

TEST(WhatifAnalysis, ComparesWithRingAndFloorAndAdvises) {
  auto topo = racks();
  Pricer pricer({}, {});
  AnalysisOptions options;
  options.sizes = {1 << 16, 1 << 26};
  const auto r = analyse_point(topo, pricer, options);
  ASSERT_EQ(r.sizes.size(), 2u);
  for (const auto& s : r.sizes) {
    EXPECT_LE(s.time, s.ring_time * (1 + 1e-9));
    EXPECT_GE(s.floor_ratio, 1 - 1e-9);
    EXPECT_GE(s.saving, -1e-9);
  }
  ASSERT_FALSE(r.bottlenecks.empty());
  for (const auto& b : r.bottlenecks) {
    EXPECT_GT(b.utilization, 0);
    EXPECT_LE(b.utilization, 1 + 1e-9);
  }
  ASSERT_FALSE(r.upgrades.empty());
  EXPECT_GT(r.upgrades.front().gain(), 0);
  // A faster link never slows a fixed schedule. (chain-bw and flexreduce-bw build new
  // schedules from the new bandwidths, and chain-bw's can be slower: left out here.)
  Pricer fixed({"flexreduce", "ring", "hierarchical", "rabenseifner", "rd-leader"}, {});
  for (const auto& u : analyse_point(topo, fixed, options).upgrades)
    EXPECT_LE(u.after, u.before * (1 + 1e-9)) << u.target;
}

TEST(WhatifAnalysis, AdviceNamesTheOneSlowLink) {
  // Everything fast but one machine's uplink: doubling that one link helps most.
  auto topo = varied({"all.bandwidth=100Gbit/s", "link:core/rack1/m1.bandwidth=1Gbit/s"});
  Pricer pricer({}, {});
  AnalysisOptions options;
  options.sizes = {1 << 28};
  const auto r = analyse_point(topo, pricer, options);
  // The classes holding it save as much at most; the advice's first step names the one link.
  ASSERT_FALSE(r.steps.empty());
  EXPECT_EQ(r.steps.front().upgrade.target, "link:core/rack1/m1");
  EXPECT_EQ(r.bottlenecks.front().link, "core/rack1/m1");
  EXPECT_GT(r.steps.front().upgrade.gain(), 0.3);
  EXPECT_GE(r.steps.front().upgrade.saved(), 0.99 * r.upgrades.front().saved());
}

TEST(WhatifSweep, WorkersGiveTheSameResultsInOrder) {
  AnalysisOptions options;
  options.sizes = {1 << 12, 1 << 24};
  options.upgrade_steps = 1;  // each step is a race per candidate; one shows the order as well
  const std::vector<std::string> axes{"machines.bandwidth*=0.5,1,2", "count:core/rack1/m0=1,2,3"};
  const auto run = [&](unsigned jobs) {
    std::vector<Variation> v;
    for (const auto& a : axes) v.push_back(parse_variation(a));
    return sweep_json(run_sweep(racks(), "racks", v, options, SweepOptions{{}, {}, jobs}));
  };
  EXPECT_EQ(run(1), run(3));
}

TEST(WhatifSweep, ReusesSchedulesWhileTheShapeHolds) {
  AnalysisOptions options;
  options.sizes = {1 << 20};
  const auto sweep = run_sweep(racks(), "racks", {parse_variation("machines.bandwidth=1Gbit/s,2Gbit/s,4Gbit/s,8Gbit/s")},
                               options, SweepOptions{{"flexreduce", "hierarchical"}, {}, 1});
  EXPECT_EQ(sweep.points.size(), 4u);
  // Schedules are built for link traffic only (pricing is the planner's race, once per point,
  // upgrade candidate and step): once per algorithm for the whole sweep.
  EXPECT_LE(sweep.schedules_built, 2u);
  EXPECT_GE(sweep.plans_priced, 4u * 2);
  EXPECT_GT(sweep.points[0].result.sizes[0].time, sweep.points[3].result.sizes[0].time);
}

using testing::run_flexplan;

class WhatifCli : public testing::ScratchDirTest {};

TEST_F(WhatifCli, BadVariationExitsTwoNamingIt) {
  const std::string topo = std::string(FLEXPLAN_SOURCE_DIR) + "/topologies/two-machines-2+3.json";
  auto run = run_flexplan("whatif " + topo + " 'machines.bandwidth=fast'");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("variation 'machines.bandwidth=fast'"), std::string::npos) << run.output;
  // Options before the positional arguments take one word each.
  run = run_flexplan("whatif -b 1M -e 2M -f 2 -a ring " + topo + " 'gpus:*=2,3' -q --format csv");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(std::count(run.output.begin(), run.output.end(), '\n'), 1 + 2 * 2) << run.output;
  run = run_flexplan("whatif " + topo + " 'count:switch/m7=2'");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("no node named 'switch/m7'"), std::string::npos) << run.output;
}

TEST_F(WhatifCli, JsonCsvAndReportAgree) {
  const std::string topo = std::string(FLEXPLAN_SOURCE_DIR) + "/topologies/two-machines-2+3.json";
  const std::string args = "whatif " + topo +
                           " 'machines.bandwidth=100Mbit/s,400Mbit/s,800Mbit/s' -b 1M -e 64M -f 64 "
                           "--workload resnet50 -q";
  const auto json_run = run_flexplan(args + " --format json", "2>/dev/null");
  ASSERT_EQ(json_run.exit_code, 0) << json_run.output;
  const auto j = nlohmann::json::parse(json_run.output);
  EXPECT_EQ(j["format"], "flexplan-whatif");
  EXPECT_EQ(j["version"], kJsonVersion);
  ASSERT_EQ(j["points"].size(), 3u);
  EXPECT_EQ(j["points"][2]["values"]["machines.bandwidth"], "800Mbit/s");
  // Faster uplinks: a shorter step and a higher efficiency.
  EXPECT_LT(j["points"][2]["step"]["step_s"].get<double>(), j["points"][0]["step"]["step_s"].get<double>());
  const auto csv_run = run_flexplan(args + " --format csv", "2>/dev/null");
  ASSERT_EQ(csv_run.exit_code, 0);
  EXPECT_EQ(csv_run.output.rfind("point,machines.bandwidth,learners,bytes,algorithm,time_s", 0), 0u);
  EXPECT_EQ(std::count(csv_run.output.begin(), csv_run.output.end(), '\n'), 1 + 3 * 2);
  const auto report = run_flexplan(args + " --report " + path("report"), "2>/dev/null");
  ASSERT_EQ(report.exit_code, 0) << report.output;
  std::ifstream in(path("report/index.html"));
  std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_GE(std::count(html.begin(), html.end(), '<') , 100);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
}

}  // namespace
}  // namespace flexplan::whatif
