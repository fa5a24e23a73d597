// The reduce-scatter, all-gather, broadcast and reduce planners on random trees: every
// (collective, algorithm, root) schedule verifies against its contract, dropping any op breaks
// it, every raced price is at or above the collective's floor, and a plan of all five
// collectives round-trips through every form; the sharded ones also with explicit, uneven
// shards.
#include <gtest/gtest.h>

#include <random>
#include <utility>
#include <string>

#include "ir/collective_contract.hpp"
#include "ir/errors.hpp"
#include "ir/pipeline_form.hpp"
#include "ir/plan_binary.hpp"
#include "ir/plan_json.hpp"
#include "ir/plan_text.hpp"
#include "ir/verify.hpp"
#include "planner/collective_algorithms.hpp"
#include "planner/collective_planner.hpp"
#include "planner/cost_model.hpp"
#include "planner/plan_builder.hpp"
#include "tests/unit/planner_test_trees.hpp"

namespace flexplan {
namespace {

constexpr ir::Collective kOthers[] = {ir::Collective::ReduceScatter, ir::Collective::AllGather,
                                      ir::Collective::Broadcast, ir::Collective::Reduce};

// Roots to try on a tree: all of a small one, a few of a larger one.
std::vector<int32_t> roots_of(const Topology& topo, std::mt19937_64& rng) {
  std::vector<int32_t> roots;
  const int32_t p = topo.num_learners();
  if (p <= 8) {
    for (int32_t r = 0; r < p; ++r) roots.push_back(r);
    return roots;
  }
  std::uniform_int_distribution<int32_t> pick(0, p - 1);
  roots = {0, p - 1, pick(rng)};
  return roots;
}

TEST(PlannerCollectives, EveryAlgorithmVerifiesOnRandomTrees) {
  testing::RandomTrees trees(0xC011EC7);
  std::mt19937_64 rng(7);
  int verified = 0;
  for (int t = 0; t < 300; ++t) {
    const Topology topo = trees.next(t % 10 == 0 ? 90 : 30);
    for (const ir::Collective collective : kOthers) {
      const std::vector<int32_t> roots =
          ir::has_root(collective) ? roots_of(topo, rng) : std::vector<int32_t>{0};
      for (const std::string& name : collective_algorithm_names(collective)) {
        std::vector<std::string> variants{name};
        if (ir::has_root(collective) && name == "binomial-tree") variants.push_back(name + "@4");
        for (const std::string& variant : variants)
          for (const int32_t root : roots) {
            const ir::Schedule schedule = plan_collective_algorithm(topo, collective, variant, root);
            EXPECT_EQ(schedule.collective, collective);
            EXPECT_NO_THROW(ir::verify_schedule(schedule, topo.num_learners()))
                << topo.name() << " " << ir::to_string(collective) << " " << variant << " root "
                << root;
            ++verified;
          }
      }
    }
  }
  EXPECT_GT(verified, 3000);
}

// Every op of these schedules delivers data some rank needs: without it the contract fails.
TEST(PlannerCollectives, DroppingAnyOpIsCaught) {
  testing::RandomTrees trees(0xD20B);
  int caught = 0;
  for (int t = 0; t < 25; ++t) {
    const Topology topo = trees.next(9);
    const int32_t p = topo.num_learners();
    for (const ir::Collective collective : kOthers)
      for (const std::string& name : collective_algorithm_names(collective)) {
        const ir::Schedule whole = plan_collective_algorithm(topo, collective, name, p - 1);
        for (size_t s = 0; s < whole.steps.size(); ++s)
          for (size_t o = 0; o < whole.steps[s].ops.size(); ++o) {
            ir::Schedule mutant = whole;
            auto& ops = mutant.steps.edit()[s].ops;
            ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(o));
            EXPECT_THROW(ir::verify_schedule(mutant, p), ir::VerifyError)
                << topo.name() << " " << ir::to_string(collective) << " " << name << " without step "
                << s << " op " << o;
            ++caught;
          }
      }
  }
  EXPECT_GT(caught, 500);
}

// Moving a shard boundary, or the root, makes a right schedule wrong.
TEST(PlannerCollectives, AnotherContractIsRefused) {
  const Topology topo = testing::machines({2, 3});
  ir::Schedule gather = plan_collective_algorithm(topo, ir::Collective::AllGather, "ring");
  ASSERT_NO_THROW(ir::verify_schedule(gather, 5));
  gather.shards = {{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}};  // the equal shards, spelled out
  EXPECT_NO_THROW(ir::verify_schedule(gather, 5));
  gather.shards[0] = {0, 0};
  gather.shards[1] = {0, 2};
  EXPECT_THROW(ir::verify_schedule(gather, 5), ir::VerifyError);
  ir::Schedule reduce = plan_collective_algorithm(topo, ir::Collective::Reduce, "binomial-tree", 3);
  ASSERT_NO_THROW(ir::verify_schedule(reduce, 5));
  reduce.root = 2;
  EXPECT_THROW(ir::verify_schedule(reduce, 5), ir::VerifyError);
  EXPECT_THROW(transpose_copies(reduce), std::invalid_argument);
}

// The floors are lower bounds: no schedule the planner prices beats them.
TEST(PlannerCollectives, NoPriceBelowTheFloor) {
  testing::RandomTrees trees(0xF100);
  for (int t = 0; t < 120; ++t) {
    const Topology topo = trees.next(40);
    for (const ir::Collective collective : kOthers) {
      const CollectivePlan planned = plan_collective(topo, collective, 0, {}, CostParams{});
      ASSERT_FALSE(planned.schedules.empty());
      for (const CollectiveCandidate& candidate : planned.candidates) {
        if (!candidate.left_out_because.empty()) continue;
        for (const double bytes : {8.0, 65536.0, 1048576.0, 268435456.0})
          EXPECT_GE(candidate.cost.at(bytes), planned.floor.at(bytes) * (1 - 1e-9))
              << topo.name() << " " << ir::to_string(collective) << " " << candidate.algorithm
              << " at " << bytes << " B";
      }
    }
  }
}

TEST(PlannerCollectives, APlanOfEveryCollectiveRoundTrips) {
  const Topology topo = testing::machines({2, 3, 1});
  PlanOptions options;
  options.collectives = {ir::Collective::AllReduce, ir::Collective::ReduceScatter,
                         ir::Collective::AllGather, ir::Collective::Broadcast,
                         ir::Collective::Reduce};
  options.roots = {0, 4};
  const ir::Plan plan = build_plan(topo, options);
  ASSERT_NO_THROW(ir::verify_plan(plan));
  for (const ir::Collective collective : options.collectives)
    for (const int32_t root : options.roots) {
      EXPECT_TRUE(ir::plans_collective(plan, collective, root));
      const ir::Schedule& chosen = ir::select_schedule(plan, collective, 1 << 20, root);
      EXPECT_EQ(chosen.collective, collective);
      if (ir::has_root(collective)) EXPECT_EQ(chosen.root, root);
    }
  EXPECT_FALSE(ir::plans_collective(plan, ir::Collective::Broadcast, 2));
  EXPECT_THROW(ir::select_schedule(plan, ir::Collective::Broadcast, 8, 2), std::out_of_range);
  const ir::Plan materialized = ir::materialize(plan);
  EXPECT_EQ(ir::materialize(ir::decode_plan(ir::encode_plan(plan), "plan.bin")), materialized);
  EXPECT_EQ(ir::parse_plan_text(ir::print_plan_text(plan), "plan"), materialized);
  EXPECT_EQ(ir::plan_from_json(ir::plan_to_json(plan)), materialized);
  // The JSON form names the contract's fields.
  const auto json = ir::plan_to_json(plan);
  bool saw_root = false;
  for (const auto& schedule : json["schedules"]) {
    const std::string collective = schedule["collective"];
    EXPECT_EQ(schedule.contains("root"), collective == "broadcast" || collective == "reduce");
    saw_root = saw_root || (schedule.contains("root") && schedule["root"] == 4);
  }
  EXPECT_TRUE(saw_root);
}

// A sharded schedule with its units refined unevenly: unit u of the planned schedule becomes
// weight[u] units, each op's range and each rank's shard follow. The result carries explicit,
// uneven shards (MPI's recvcounts) and moves the same data, so it must verify; moving a shard
// boundary by one unit, or swapping two ranks' shards, must not.
ir::Schedule refined(const ir::Schedule& planned, int32_t ranks, const std::vector<uint64_t>& weight) {
  std::vector<uint64_t> start(planned.units + 1, 0);
  for (uint64_t u = 0; u < planned.units; ++u) start[u + 1] = start[u] + weight[u];
  ir::Schedule out = planned;
  out.units = start.back();
  out.shards.clear();
  const auto p = static_cast<uint64_t>(ranks);
  for (uint64_t r = 0; r < p; ++r) {
    // The planned schedule's equal shards, spelled out before refining.
    const ir::UnitRange equal{r * planned.units / p, (r + 1) * planned.units / p};
    const ir::UnitRange shard = planned.shards.empty() ? equal : planned.shards[r];
    out.shards.push_back({start[shard.begin], start[shard.end]});
  }
  for (ir::Step& step : out.steps.edit())
    for (ir::Op& op : step.ops) {
      op.begin = start[op.begin];
      op.end = start[op.end];
    }
  return out;
}

TEST(PlannerCollectives, UnevenShardsVerifyOnRandomTrees) {
  testing::RandomTrees trees(0x5EA2D5);
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<uint64_t> weight_of(1, 4);
  int verified = 0, caught = 0;
  for (int t = 0; t < 1000; ++t) {
    const Topology topo = trees.next(t % 50 == 0 ? 60 : 12);
    const int32_t p = topo.num_learners();
    for (const ir::Collective collective : {ir::Collective::ReduceScatter, ir::Collective::AllGather})
      for (const std::string& name : collective_algorithm_names(collective)) {
        const ir::Schedule planned = plan_collective_algorithm(topo, collective, name);
        if (planned.slices != 1) continue;  // (a compact pipeline's units are its base's)
        std::vector<uint64_t> weight(planned.units);
        for (uint64_t& w : weight) w = weight_of(rng);
        const ir::Schedule uneven = refined(planned, p, weight);
        EXPECT_NO_THROW(ir::verify_schedule(uneven, p))
            << topo.name() << " " << ir::to_string(collective) << " " << name;
        ++verified;
        // Find a rank whose shard has two units or more and give its last unit to the next rank.
        std::uniform_int_distribution<int32_t> pick(0, p - 2);
        const int32_t r = pick(rng);
        ir::Schedule moved = uneven;
        if (moved.shards[r].end - moved.shards[r].begin >= 2 && moved.shards[r].end == moved.shards[r + 1].begin) {
          --moved.shards[r].end;
          --moved.shards[r + 1].begin;
          EXPECT_THROW(ir::verify_schedule(moved, p), ir::VerifyError)
              << topo.name() << " " << ir::to_string(collective) << " " << name << ": boundary of rank " << r;
          ++caught;
        }
        ir::Schedule swapped = uneven;
        std::swap(swapped.shards[r], swapped.shards[r + 1]);
        EXPECT_THROW(ir::verify_schedule(swapped, p), ir::VerifyError)
            << topo.name() << " " << ir::to_string(collective) << " " << name << ": ranks " << r << ", " << r + 1;
        ++caught;
      }
  }
  EXPECT_GT(verified, 3000);
  EXPECT_GT(caught, 4000);
}

TEST(PlannerCollectives, ExplicitShardsRoundTripAndAreChecked) {
  ir::Plan plan;
  plan.world_size = 2;
  ir::Schedule swap;
  swap.algorithm = "swap";
  swap.collective = ir::Collective::AllGather;
  swap.units = 10;
  swap.shards = {{0, 2}, {2, 10}};
  ir::Step step;
  step.phase = ir::Phase::AllGather;
  ir::Op a;
  a.kind = ir::OpKind::Broadcast;
  a.begin = 0, a.end = 2, a.root = 0, a.group = {0, 1};
  ir::Op b = a;
  b.begin = 2, b.end = 10, b.root = 1, b.group = {1, 0};
  step.ops = {a, b};
  swap.steps.edit().push_back(step);
  plan.schedules.push_back(swap);
  ASSERT_NO_THROW(ir::verify_plan(plan));
  EXPECT_EQ(ir::decode_plan(ir::encode_plan(plan), "plan.bin"), plan);
  EXPECT_EQ(ir::plan_from_json(ir::plan_to_json(plan)), plan);
  EXPECT_EQ(ir::parse_plan_text(ir::print_plan_text(plan), "plan"), plan);
  auto json = ir::plan_to_json(plan);
  json["schedules"][0]["collective"] = "allreduce";
  EXPECT_THROW(ir::plan_from_json(json), ir::PlanFormatError);  // an all-reduce has no shards
}

// Reduce-scatter and reduce are planned as the transpose of all-gather's and broadcast's race:
// the evaluator must price every row's transpose as the row itself (up to rounding).
TEST(PlannerCollectives, TransposesCostWhatTheirCopiesCost) {
  testing::RandomTrees trees(0x7A05E);
  CostParams overhead;
  overhead.hop_overhead = 3e-6;
  CostParams reductions;
  reductions.reduce_bandwidth = 20e9;
  int compared = 0;
  for (int t = 0; t < 60; ++t) {
    const Topology topo = trees.next(t % 6 == 0 ? 80 : 24);
    const int32_t root = topo.num_learners() - 1;
    for (const ir::Collective copying : {ir::Collective::AllGather, ir::Collective::Broadcast})
      for (const std::string& name : collective_algorithm_names(copying)) {
        std::vector<std::string> variants{name};
        if (name == "binomial-tree") variants.insert(variants.end(), {name + "@4", name + "@16"});
        for (const std::string& variant : variants) {
          const ir::Schedule copies = plan_collective_algorithm(topo, copying, variant, root);
          const ir::Schedule combined = transpose_copies(copies);
          EXPECT_TRUE(transposes_at_same_price(copies, overhead)) << topo.name() << " " << variant;
          EXPECT_FALSE(transposes_at_same_price(copies, reductions));
          for (const CostParams& cost : {CostParams{}, overhead}) {
            const ScheduleCost forth = evaluate_schedule(topo, copies, cost);
            const ScheduleCost back = evaluate_schedule(topo, combined, cost);
            for (const double bytes : {8.0, 65536.0, 3e6, 268435456.0}) {
              EXPECT_NEAR(back.at(bytes), forth.at(bytes), forth.at(bytes) * 1e-12)
                  << topo.name() << " " << variant << " at " << bytes << " B";
              ++compared;
            }
          }
        }
      }
  }
  EXPECT_GT(compared, 3000);
}

// A combining plan is its mirror's plan transposed, whether priced as the mirror or not.
TEST(PlannerCollectives, ACombiningPlanIsItsMirrorTransposed) {
  testing::RandomTrees trees(0x3122);
  CostParams reductions;
  reductions.reduce_bandwidth = 5e9;
  for (int t = 0; t < 40; ++t) {
    const Topology topo = trees.next(40);
    for (const auto& [copying, combining] :
         {std::pair{ir::Collective::AllGather, ir::Collective::ReduceScatter},
          std::pair{ir::Collective::Broadcast, ir::Collective::Reduce}}) {
      const CollectivePlan copies = plan_collective(topo, copying, 1, {}, CostParams{});
      const CollectivePlan combined = plan_collective(topo, combining, 1, {}, CostParams{});
      ASSERT_EQ(combined.schedules.size(), copies.schedules.size()) << topo.name();
      for (size_t i = 0; i < copies.schedules.size(); ++i) {
        ir::Schedule expected = transpose_copies(copies.schedules[i]);
        EXPECT_EQ(combined.schedules[i], expected) << topo.name() << " " << i;
      }
      // Priced as transposes (reductions cost): other winners may come, each its own transpose.
      const CollectivePlan priced = plan_collective(topo, combining, 1, {}, reductions);
      for (const ir::Schedule& schedule : priced.schedules) {
        EXPECT_EQ(schedule.collective, combining);
        EXPECT_NO_THROW(ir::verify_schedule(schedule, topo.num_learners()));
        const CollectiveCandidate& chosen = priced.chosen(schedule.min_bytes);
        EXPECT_NEAR(chosen.cost.at(1e6), evaluate_schedule(topo, schedule, reductions).at(1e6),
                    chosen.cost.at(1e6) * 1e-12);
      }
    }
  }
}

// verify_plan proves a reduce-scatter or reduce through the all-gather or broadcast it is the
// transpose of only where each unit reaches each rank once; otherwise it executes it, so a
// wrong transpose is still caught.
TEST(PlannerCollectives, AWrongTransposeIsStillCaught) {
  const auto plan_of = [](int32_t p, const ir::Schedule& copies) {
    ir::Plan plan;
    plan.world_size = p;
    plan.schedules = {transpose_copies(copies), copies};
    return plan;
  };
  const auto op = [](int32_t root, ir::RankList group, uint64_t begin = 0, uint64_t end = 1) {
    ir::Op o;
    o.kind = ir::OpKind::Broadcast;
    o.begin = begin, o.end = end, o.root = root, o.group = std::move(group);
    return o;
  };
  const auto broadcast = [](std::vector<std::vector<ir::Op>> steps) {
    ir::Schedule schedule;
    schedule.algorithm = "hand";
    schedule.collective = ir::Collective::Broadcast;
    schedule.units = 1;
    for (auto& ops : steps) {
      ir::Step step;
      step.phase = ir::Phase::Broadcast;
      step.ops = std::move(ops);
      schedule.steps.edit().push_back(std::move(step));
    }
    return schedule;
  };
  // Right: a binomial tree, and a ring all-gather.
  const ir::Schedule tree = broadcast({{op(0, {0, 2})}, {op(0, {0, 1}), op(2, {2, 3})}});
  ASSERT_NO_THROW(ir::verify_plan(plan_of(4, tree)));
  const Topology topo = testing::machines({2, 3, 1});
  const ir::Schedule ring = plan_collective_algorithm(topo, ir::Collective::AllGather, "ring");
  ASSERT_NO_THROW(ir::verify_plan(plan_of(6, ring)));
  // Rank 1 gets the data twice: a right broadcast, a reduce that counts rank 1 twice.
  const ir::Schedule twice = broadcast({{op(0, {0, 2})}, {op(0, {0, 1}), op(2, {2, 3})}, {op(3, {3, 1})}});
  ASSERT_NO_THROW(ir::verify_schedule(twice, 4));
  EXPECT_THROW(ir::verify_plan(plan_of(4, twice)), ir::VerifyError);
  // Root 0 sends in two ops of one step: its transpose writes rank 0 twice in a step.
  const ir::Schedule fan = broadcast({{op(0, {0, 1}), op(0, {0, 2})}, {op(2, {2, 3})}});
  ASSERT_NO_THROW(ir::verify_schedule(fan, 4));
  EXPECT_THROW(ir::verify_plan(plan_of(4, fan)), ir::VerifyError);
  // A root outside its group: its transpose drops the root's own input.
  const ir::Schedule outside = broadcast({{op(0, {1, 2})}, {op(2, {2, 3})}});
  ASSERT_NO_THROW(ir::verify_schedule(outside, 4));
  EXPECT_THROW(ir::verify_plan(plan_of(4, outside)), ir::VerifyError);
  // An all-gather that sends a shard again to a rank holding it.
  ir::Schedule again = ring;
  again.steps.edit().back().ops.push_back(op(0, {0, 3}, 0, 1));
  ASSERT_NO_THROW(ir::verify_schedule(again, 6));
  EXPECT_THROW(ir::verify_plan(plan_of(6, again)), ir::VerifyError);
}

}  // namespace
}  // namespace flexplan
