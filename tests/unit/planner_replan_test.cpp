// Re-planning from an earlier plan (KeptSchedule, PlanOptions::kept): its schedules race again
// as they are, under kept rows; a plan re-planned from itself is the same plan; what a re-plan
// keeps is what the plan file holds; a schedule that is not an all-reduce of the topology's
// learners is refused; and the plan command's --from end to end.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir/plan_binary.hpp"
#include "ir/verify.hpp"
#include "planner/algorithm_table.hpp"
#include "planner/cost_model.hpp"
#include "planner/plan_builder.hpp"
#include "planner/plan_price.hpp"
#include "planner_test_trees.hpp"
#include "tests/unit/cli_run.hpp"
#include "topology/topology_writer.hpp"

namespace flexplan {
namespace {

PlanReport plan_of(const Topology& topo, std::vector<KeptSchedule> from = {}) {
  PlanOptions options;
  options.compact_pipelines = true;
  options.kept = std::move(from);
  return build_plan_report(topo, options);
}

// Every link's bandwidth times `factor` where `pick` says so.
Topology faster(const Topology& topo, double factor, const std::vector<bool>& pick) {
  Topology varied = topo;
  std::vector<Topology::UplinkChange> links;
  for (NodeId n = 1; n < topo.num_nodes(); ++n)
    if (pick[static_cast<size_t>(n)]) {
      Link link = topo.uplink(n);
      link.bandwidth *= factor;
      links.push_back({n, link});
    }
  varied.set_uplinks(links);
  return varied;
}

TEST(PlannerReplan, KeptRowsAreNamedAfterTheirRowAndStable) {
  const AlgorithmRow& tree = *find_algorithm("switch-tree").row;
  const AlgorithmRow& kept = kept_row(tree);
  EXPECT_EQ(kept.name, "kept:switch-tree");
  EXPECT_EQ(kept_row(tree, 1).name, "kept2:switch-tree");
  EXPECT_EQ(&kept_row(tree), &kept);
  EXPECT_EQ(&kept_row(kept), &kept);  // a kept row's kept row is itself
  EXPECT_EQ(kept.kept_from, &tree);
  EXPECT_EQ(kept.critical_path, tree.critical_path);
  EXPECT_EQ(kept.pipelines, tree.pipelines);
  EXPECT_EQ(kept.build, nullptr);
  EXPECT_THROW(find_algorithm("kept:switch-tree"), std::invalid_argument);  // not a name to ask for
}

TEST(PlannerReplan, APlanReplannedFromItselfIsTheSamePlan) {
  testing::RandomTrees trees(31'337);
  for (int t = 0; t < 12; ++t) {
    const Topology topo = trees.next(10);
    const PlanReport first = plan_of(topo);
    const std::vector<KeptSchedule> kept = kept_schedules(first.plan);
    EXPECT_EQ(kept, first.kept) << topo.name();
    EXPECT_FALSE(kept.empty()) << topo.name();
    const PlanReport again = plan_of(topo, kept);
    // Kept rows raced (each priced the same as its row's) and lost every tie.
    EXPECT_TRUE(std::any_of(again.candidates.begin(), again.candidates.end(),
                            [](const Candidate& c) { return c.algorithm.starts_with("kept:") && c.racing(); }))
        << topo.name();
    EXPECT_EQ(again.plan, first.plan) << topo.name();
  }
}

TEST(PlannerReplan, FasterLinksNeverGiveADearerPlanAndTheFileNamesItsRows) {
  testing::RandomTrees trees(4'711);
  std::mt19937_64 rng(99);
  int kept_won = 0;
  for (int t = 0; t < 16; ++t) {
    const Topology topo = trees.next(10);
    const PlanReport base = plan_of(topo);
    std::vector<bool> pick(static_cast<size_t>(topo.num_nodes()));
    for (size_t n = 1; n < pick.size(); ++n) pick[n] = std::bernoulli_distribution(0.3)(rng);
    const Topology varied = faster(topo, 1.5 + t % 3, pick);
    const PlanReport replanned = plan_of(varied, kept_schedules(base.plan));
    ir::verify_plan(replanned.plan);
    const PlanPrice before = plan_price(base), after = plan_price(replanned);
    for (double n = 1; n < 1e10; n *= 3.7) {
      const auto bytes = static_cast<uint64_t>(n);
      EXPECT_LE(after.time(bytes), before.time(bytes) * (1 + 1e-9)) << topo.name() << " at " << bytes;
    }
    // A kept winner is written under its row's name, as the runtime and codegen know it.
    for (const ir::Schedule& schedule : replanned.plan.schedules)
      EXPECT_NO_THROW(find_algorithm(schedule.algorithm)) << schedule.algorithm;
    for (const PlanRange& range : replanned.ranges)
      kept_won += replanned.candidates[range.candidate].algorithm.starts_with("kept");
  }
  // Not a goal, but the test would prove little if no kept schedule ever won: it does on these.
  EXPECT_GT(kept_won, 0);
}

TEST(PlannerReplan, AScheduleOfOtherLearnersIsRefused) {
  testing::RandomTrees trees(5);
  const Topology small = trees.next(4);
  Topology big = trees.next(12);
  while (big.num_learners() <= small.num_learners()) big = trees.next(12);
  const PlanReport plan = plan_of(big);
  const std::vector<KeptSchedule> kept = kept_schedules(plan.plan);
  ASSERT_FALSE(kept.empty());
  try {
    plan_of(small, kept);
    FAIL() << "planned " << small.name() << " from a plan of " << big.num_learners() << " learners";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("kept schedule 0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("learners"), std::string::npos) << e.what();
  }
  // A row with a closed form (built from the shape alone: never kept), a pipeline's slice count
  // on a row that does not pipeline, and a name no row has.
  std::vector<KeptSchedule> bad = {kept.front()};
  bad.front().base.algorithm = "hierarchical";
  try {
    plan_of(big, bad);
    ADD_FAILURE() << "kept a schedule of a row with a closed form";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("closed form"), std::string::npos) << e.what();
  }
  bad.front().base.algorithm = "direct";
  bad.front().slices = {4};
  EXPECT_THROW(plan_of(big, bad), std::invalid_argument);
  bad.front().base.algorithm = "no-such-row";
  bad.front().slices = {};
  EXPECT_THROW(plan_of(big, bad), std::invalid_argument);
}

TEST(PlannerReplan, ForcedAlgorithmsIgnoreKeptSchedules) {
  testing::RandomTrees trees(77);
  const Topology topo = trees.next(8);
  PlanOptions options;
  options.algorithms = {"ring"};
  options.kept = kept_schedules(plan_of(topo).plan);
  const PlanReport forced = build_plan_report(topo, options);
  ASSERT_EQ(forced.candidates.size(), 1u);
  EXPECT_EQ(forced.candidates[0].algorithm, "ring");
}

using PlannerReplanCli = testing::ScratchDirTest;

TEST_F(PlannerReplanCli, FromAnEarlierPlan) {
  const std::string base = std::string(FLEXPLAN_SOURCE_DIR) + "/bench/whatif/user-14.json";
  // The 2-GPU machine's NIC from 25 to 100 Gbit/s.
  nlohmann::json tree;
  std::ifstream(base) >> tree;
  for (auto& child : tree["root"]["children"])
    if (child["name"] == "small") child["link"]["bandwidth"] = "100 Gbit/s";
  const std::string upgraded = path("upgraded.json");
  std::ofstream(upgraded) << tree.dump();
  const auto first = testing::run_flexplan(base + " -o " + path("base.bin") + " --format json");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const auto again = testing::run_flexplan(upgraded + " --from " + path("base.bin") + " -o " +
                                           path("new.bin") + " --format json");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  const auto before = nlohmann::json::parse(first.output), after = nlohmann::json::parse(again.output);
  const auto& was = before["allreduce"]["predictions"];
  const auto& is = after["allreduce"]["predictions"];
  ASSERT_EQ(was.size(), is.size());
  for (size_t i = 0; i < was.size(); ++i)
    EXPECT_LE(is[i]["seconds"].get<double>(), was[i]["seconds"].get<double>() * (1 + 1e-9)) << is[i].dump();
  bool kept_raced = false;
  for (const auto& candidate : after["allreduce"]["candidates"])
    kept_raced = kept_raced || candidate["algorithm"].get<std::string>().starts_with("kept:");
  EXPECT_TRUE(kept_raced) << after["allreduce"]["candidates"].dump();
  // The plan written names its all-reduce schedules by their rows.
  for (const ir::Schedule& schedule : ir::read_plan_file(path("new.bin")).schedules) {
    if (schedule.collective == ir::Collective::AllReduce) {
      EXPECT_NO_THROW(find_algorithm(schedule.algorithm)) << schedule.algorithm;
    }
  }

  // Another cluster's plan, a missing file, a forced algorithm: exit 2, saying what.
  const auto other = testing::run_flexplan(std::string(FLEXPLAN_SOURCE_DIR) + "/topologies/two-machines-2+3.json --from " +
                                           path("base.bin") + " -o " + path("x.bin"));
  EXPECT_EQ(other.exit_code, 2) << other.output;
  EXPECT_NE(other.output.find("the plan is for 14 learners"), std::string::npos) << other.output;
  const auto missing = testing::run_flexplan(upgraded + " --from " + path("none.bin") + " -o " + path("x.bin"));
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  const auto forced = testing::run_flexplan(upgraded + " --from " + path("base.bin") + " -a ring -o " + path("x.bin"));
  EXPECT_EQ(forced.exit_code, 2) << forced.output;
  EXPECT_NE(forced.output.find("excludes"), std::string::npos) << forced.output;

  // A plan that names no ranks (the text form allows it): checked by its world size, with a warning.
  const auto text = testing::run_flexplan("inspect " + path("base.bin"), "2>/dev/null");
  ASSERT_EQ(text.exit_code, 0);
  std::istringstream lines(text.output);
  std::ofstream unnamed(path("unnamed.txt"));
  for (std::string line; std::getline(lines, line);)
    if (!line.starts_with("rank ")) unnamed << line << "\n";
  unnamed.close();
  const auto anonymous = testing::run_flexplan(upgraded + " --from " + path("unnamed.txt") + " -o " + path("y.bin"));
  EXPECT_EQ(anonymous.exit_code, 0) << anonymous.output;
  EXPECT_NE(anonymous.output.find("the plan names no ranks"), std::string::npos) << anonymous.output;
}

}  // namespace
}  // namespace flexplan
