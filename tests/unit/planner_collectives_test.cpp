// The reduce-scatter, all-gather, broadcast and reduce planners on random trees: every
// (collective, algorithm, root) schedule verifies against its contract, dropping any op breaks
// it, every raced price is at or above the collective's floor, and a plan of all five
// collectives round-trips through every form; the sharded ones also with explicit, uneven
// shards.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <random>
#include <utility>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "ir/collective_contract.hpp"
#include "ir/errors.hpp"
#include "ir/pipeline_form.hpp"
#include "ir/plan_binary.hpp"
#include "ir/plan_json.hpp"
#include "ir/plan_text.hpp"
#include "ir/verify.hpp"
#include "planner/algorithm_table.hpp"
#include "planner/collective_algorithms.hpp"
#include "planner/collective_planner.hpp"
#include "planner/cost_model.hpp"
#include "planner/machines.hpp"
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
        if (ir::has_root(collective) && name != "chain") variants.push_back(name + "@4");
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
      if (ir::has_root(collective)) {
        EXPECT_EQ(chosen.root, root);
      }
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

// The other collectives planned on a thread beside all-reduce's race (PlanOptions::
// plan_collectives_beside_from_learners) give the plan, the left-out notes and the progress
// lines (in another order) that planning them after it gives, on random trees of a held-back
// seed with two roots; the races that end while another runs verify their schedules.
TEST(PlannerCollectives, PlanningBesideAllReduceChangesNothing) {
  testing::RandomTrees trees(90317);
  std::vector<Topology> topologies;
  for (int t = 0; t < 6; ++t) topologies.push_back(trees.next(t < 3 ? 20 : 90));
  for (size_t t = 0; t < topologies.size(); ++t) {
    const Topology& topo = topologies[t];
    PlanOptions after;
    after.collectives = {ir::Collective::AllReduce, ir::Collective::ReduceScatter,
                         ir::Collective::AllGather, ir::Collective::Broadcast,
                         ir::Collective::Reduce};
    after.roots = {0, topo.num_learners() - 1};
    after.leave_out_unbuildable = true;
    after.plan_collectives_beside_from_learners = std::numeric_limits<int>::max();
    std::vector<std::string> lines_after, lines_beside;
    after.progress = [&](std::string_view line) { lines_after.emplace_back(line); };
    PlanOptions beside = after;
    beside.plan_collectives_beside_from_learners = 1;
    beside.progress = [&](std::string_view line) { lines_beside.emplace_back(line); };
    const PlanReport one = build_plan_report(topo, after);
    const PlanReport other = build_plan_report(topo, beside);
    EXPECT_EQ(ir::encode_plan(other.plan), ir::encode_plan(one.plan)) << topo.name();
    EXPECT_EQ(other.collectives_left_out, one.collectives_left_out) << topo.name();
    // Of the three races, the two that end first verify their schedules on their threads.
    EXPECT_EQ(one.verified, nullptr);
    ASSERT_NE(other.verified, nullptr);
    const auto held = std::count_if(other.plan.schedules.begin(), other.plan.schedules.end(),
                                    [&](const ir::Schedule& s) { return other.verified->holds(s, topo.num_learners()); });
    EXPECT_GE(held, 1) << topo.name();
    EXPECT_NO_THROW(ir::verify_plan(other.plan, other.verified.get())) << topo.name();
    // Timings aside ("in 0.001 s"), the same lines.
    const auto untimed = [](std::vector<std::string> lines) {
      for (std::string& line : lines) line = line.substr(0, line.find(" in "));
      std::sort(lines.begin(), lines.end());
      return lines;
    };
    EXPECT_EQ(untimed(lines_beside), untimed(lines_after)) << topo.name();
    EXPECT_FALSE(lines_after.empty());  // (the race notes what it leaves out)
  }
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
          // The relay trees' steps hold chains of different lengths (each branch's fan-out):
          // their transposes are priced on their own (ACombiningPlanIsItsMirrorTransposed).
          if (name == "relay-stars" || name == "relay-machines") continue;
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

// A tree of the random family with its ranks renumbered in depth-first order (the numbering
// of generated and real clusters, where a subtree's shards are one run of units).
Topology depth_first_numbered(const Topology& topo) {
  TopoGraph graph = topo.graph();
  const auto order = topo.learners_under(topo.root());
  for (size_t place = 0; place < order.size(); ++place)
    graph[static_cast<size_t>(topo.learner_node(order[place]))].rank = static_cast<int>(place);
  return Topology(topo.name() + "-df", graph);
}

// Runs a copying or combining schedule on numbers, apart from the verifier: all-gather, every
// unit starts at its owner's value and must end everywhere; reduce-scatter, every rank starts
// with its own value on every unit and must end with the sum on its shard. Ops read the buffers
// as the step began. Returns "" or what is wrong.
std::string replay_error(const ir::Schedule& schedule, int32_t p) {
  const uint64_t units = schedule.units;
  std::vector<ir::UnitRange> shard(static_cast<size_t>(p));
  for (int32_t r = 0; r < p; ++r) shard[static_cast<size_t>(r)] = ir::shard_of(schedule, p, r);
  const bool gather = schedule.collective == ir::Collective::AllGather;
  const auto value = [](int32_t r) { return uint64_t{1} << (r % 60); };
  std::vector<std::vector<uint64_t>> held(static_cast<size_t>(p), std::vector<uint64_t>(units, 0));
  for (int32_t r = 0; r < p; ++r)
    for (uint64_t u = 0; u < units; ++u)
      if (!gather || (shard[static_cast<size_t>(r)].begin <= u && u < shard[static_cast<size_t>(r)].end))
        held[static_cast<size_t>(r)][u] = value(r) + (gather ? u : 0);
  for (const ir::Step& step : schedule.steps) {
    const auto before = held;
    for (const ir::Op& op : step.ops)
      for (uint64_t u = op.begin; u < op.end; ++u) {
        if (op.kind == ir::OpKind::Broadcast) {
          for (const int32_t m : op.group)
            if (m != op.root) held[static_cast<size_t>(m)][u] = before[static_cast<size_t>(op.root)][u];
        } else {
          uint64_t sum = 0;
          for (const int32_t m : op.group) sum += before[static_cast<size_t>(m)][u];
          held[static_cast<size_t>(op.root)][u] = sum;
        }
      }
  }
  uint64_t total = 0;
  for (int32_t r = 0; r < p; ++r) total += value(r);
  for (int32_t r = 0; r < p; ++r)
    for (uint64_t u = 0; u < units; ++u) {
      int32_t owner = 0;
      while (!(shard[static_cast<size_t>(owner)].begin <= u && u < shard[static_cast<size_t>(owner)].end)) ++owner;
      if (gather && held[static_cast<size_t>(r)][u] != value(owner) + u)
        return "rank " + std::to_string(r) + " lacks unit " + std::to_string(u);
      if (!gather && owner == r && held[static_cast<size_t>(r)][u] != total)
        return "rank " + std::to_string(r) + " has a wrong sum on unit " + std::to_string(u);
    }
  return "";
}

// The relay tree on random trees numbered both ways, its siblings exchanging around chains
// (the builder's default) and in stars (relay-stars): the verifier and the replay above accept
// its all-gather and its reduce-scatter, every chain or star is one branch's children long,
// and its price is never below the floor.
// relay-machines likewise, its chains down at most a branch's fan-out plus its machine
// children's other learners long.
TEST(PlannerCollectives, RelayTreeVerifiesAndReplaysOnRandomTrees) {
  testing::RandomTrees trees(0x4E1A7);
  int checked = 0;
  for (int t = 0; t < 200; ++t) {
    const Topology random = trees.next(t % 10 == 0 ? 120 : 40);
    for (const Topology& topo : {random, depth_first_numbered(random)}) {
      const int32_t p = topo.num_learners();
      int fan_out = 0;
      for (NodeId n = 0; n < topo.num_nodes(); ++n) fan_out = std::max(fan_out, topo.degree(n));
      const CostFloor floor = collective_floor(topo, ir::Collective::AllGather);
      for (const int variant : {0, 1, 2})
      for (const ir::Collective collective : {ir::Collective::AllGather, ir::Collective::ReduceScatter}) {
        const bool machines = variant == 1;
        const ir::Schedule schedule =
            variant == 0 ? [&] {
              ir::Schedule chains = plan_relay_tree_allgather(topo);
              return collective == ir::Collective::AllGather ? chains : transpose_copies(chains);
            }()
                         : plan_collective_algorithm(topo, collective, machines ? "relay-machines" : "relay-stars");
        // The longest chain relay-machines may build: a branch's relays and its machine
        // children's other learners.
        size_t longest = static_cast<size_t>(fan_out);
        if (machines)
          for (NodeId n = 0; n < topo.num_nodes(); ++n) {
            size_t members = static_cast<size_t>(topo.degree(n));
            for (const NodeId c : topo.children(n))
              if (topo.is_machine(c)) members += static_cast<size_t>(topo.degree(c)) - 1;
            longest = std::max(longest, members);
          }
        EXPECT_NO_THROW(ir::verify_schedule(schedule, p)) << topo.name() << " " << ir::to_string(collective);
        EXPECT_EQ(replay_error(schedule, p), "") << topo.name() << " " << ir::to_string(collective);
        if (!schedule.steps.empty()) {  // the replay can fail: without an op it does
          ir::Schedule mutant = schedule;
          mutant.steps.edit()[t % schedule.steps.size()].ops.pop_back();
          EXPECT_NE(replay_error(mutant, p), "") << topo.name() << " " << ir::to_string(collective);
        }
        const RelayTreeSize size = relay_tree_size(topo, machines);
        uint64_t ops = 0, members = 0;
        for (const ir::Step& step : schedule.steps)
          for (const ir::Op& op : step.ops) {
            ++ops;
            members += op.group.size();
            EXPECT_LE(op.group.size(), longest) << topo.name();
          }
        EXPECT_LE(ops, size.ops) << topo.name();
        EXPECT_LE(members, size.members) << topo.name();
        EXPECT_LE(schedule.steps.size(), static_cast<size_t>(3 * topo.num_levels())) << topo.name();
        const ScheduleCost cost = evaluate_schedule(topo, schedule);
        for (const double bytes : {8.0, 1048576.0, 268435456.0})
          EXPECT_GE(cost.at(bytes), floor.at(bytes) * (1 - 1e-9)) << topo.name() << " at " << bytes;
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 2400);
}

// At a large P the schedule stays small: a generated-like tree of 64,000 learners (racks of
// machines of 1-8 GPUs under pods and zones) is built in well under a second, within the
// schedule limits, in a few steps, and relay_tree_size bounds it without building.
// The evaluator's step memo changes no price: relay-stars, relay-machines (which share the
// chains down of branches without machine children), their transposes, the ring and a pipeline priced through one memo, in that
// order, against each priced alone, on random trees numbered both ways; the memo answers for
// shared steps, and a step equal to one priced before but in a schedule of other units (each
// op a smaller share of the message) is priced again.
TEST(PlannerCollectives, StepMemoChangesNoPrice) {
  testing::RandomTrees trees(0x5E3D0);
  size_t answered = 0;
  for (int t = 0; t < 40; ++t) {
    const Topology random = trees.next(t % 8 == 0 ? 90 : 30);
    for (const Topology& topo : {random, depth_first_numbered(random)}) {
      CostParams params;
      params.hop_overhead = 0.7e-6;
      std::vector<ir::Schedule> schedules;
      for (const char* name : {"relay-stars", "relay-machines"})
        schedules.push_back(plan_collective_algorithm(topo, ir::Collective::AllGather, name));
      for (size_t i = 0; i < 2; ++i) schedules.push_back(transpose_copies(schedules[i]));
      schedules.push_back(plan_collective_algorithm(topo, ir::Collective::AllGather, "ring"));
      schedules.push_back(ir::compact_pipeline(plan_collective_algorithm(topo, ir::Collective::Broadcast, "binomial-tree"), 4));
      ir::Schedule wider = schedules[0];
      wider.units *= 3;
      schedules.push_back(wider);
      StepPriceMemo memo;
      for (const ir::Schedule& schedule : schedules) {
        const ScheduleCost alone = evaluate_schedule(topo, schedule, params);
        const ScheduleCost remembered = evaluate_schedule(topo, schedule, params, &memo);
        ASSERT_EQ(remembered.steps.size(), alone.steps.size()) << topo.name() << " " << schedule.algorithm;
        for (const double bytes : {8.0, 65536.0, 4194304.0, 268435456.0}) {
          EXPECT_EQ(remembered.at(bytes), alone.at(bytes)) << topo.name() << " " << schedule.algorithm << " at " << bytes;
          for (size_t s = 0; s < alone.steps.size(); ++s)
            EXPECT_EQ(remembered.steps[s].at(bytes, alone.chunk_bytes), alone.steps[s].at(bytes, alone.chunk_bytes))
                << topo.name() << " " << schedule.algorithm << " step " << s;
        }
      }
      answered += memo.steps_found();
    }
  }
  // relay-machines's chains down of branches without machine children, and its transpose's,
  // are relay-stars' (84 found on these 80 trees).
  EXPECT_GE(answered, 40u);
}

// Siblings exchanging in stars: on a switch of 16 machines behind 10 us NICs, a block crosses
// one NIC hop instead of up to fifteen around a chain, so relay-stars is far cheaper at 8 B and
// 64 KiB; each relay's NIC carries the same blocks either way, so at 256 MiB it costs about
// what the chains do (a star's flows into one NIC are priced with the incast loss).
TEST(PlannerCollectives, SiblingsInStarsCrossOneHopNotAFanOut) {
  testing::TreeBuilder b("wide");
  for (int m = 0; m < 16; ++m) {
    const NodeId machine = b.add_switch(b.root(), "m" + std::to_string(m), {12.5e9, 10e-6});
    for (int g = 0; g < 2; ++g) b.add_learner(machine, "gpu" + std::to_string(g), {25e9, 2e-6});
  }
  const Topology topo = b.build();
  CostParams cost;
  cost.hop_overhead = kMeasuredHopOverhead;
  const ScheduleCost chains = evaluate_schedule(topo, plan_relay_tree_allgather(topo), cost);
  const ScheduleCost stars =
      evaluate_schedule(topo, plan_collective_algorithm(topo, ir::Collective::AllGather, "relay-stars"), cost);
  EXPECT_LT(stars.at(8.0), 0.25 * chains.at(8.0));
  EXPECT_LT(stars.at(65536.0), 0.5 * chains.at(65536.0));
  EXPECT_LT(stars.at(268435456.0), 1.2 * chains.at(268435456.0));
  EXPECT_GE(stars.at(268435456.0), collective_floor(topo, ir::Collective::AllGather).at(268435456.0) * (1 - 1e-9));
}

// replay_error's counterpart for broadcast and reduce: a broadcast's root starts with a value
// every rank must end with; a reduce's ranks start with their own and the root must end with
// the sum. Returns "" or what is wrong.
std::string rooted_replay_error(const ir::Schedule& schedule, int32_t p) {
  const bool broadcast = schedule.collective == ir::Collective::Broadcast;
  // A 64-bit mix of the rank (sums wrap): a rank counted twice and another dropped leave the
  // total unchanged only by a collision of these values.
  const auto value = [](int32_t r) {
    uint64_t z = static_cast<uint64_t>(r) + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  std::vector<std::vector<uint64_t>> held(static_cast<size_t>(p), std::vector<uint64_t>(schedule.units, 0));
  for (int32_t r = 0; r < p; ++r)
    for (uint64_t u = 0; u < schedule.units; ++u)
      if (!broadcast || r == schedule.root) held[static_cast<size_t>(r)][u] = value(r) + u;
  for (const ir::Step& step : schedule.steps) {
    const auto before = held;
    for (const ir::Op& op : step.ops)
      for (uint64_t u = op.begin; u < op.end; ++u) {
        uint64_t sum = 0;
        for (const int32_t m : op.group) sum += before[static_cast<size_t>(m)][u];
        if (op.kind == ir::OpKind::Broadcast)
          for (const int32_t m : op.group) held[static_cast<size_t>(m)][u] = before[static_cast<size_t>(op.root)][u];
        else
          held[static_cast<size_t>(op.root)][u] = sum;
      }
  }
  uint64_t total = 0;
  for (int32_t r = 0; r < p; ++r) total += value(r);
  for (uint64_t u = 0; u < schedule.units; ++u) {
    if (broadcast) {
      for (int32_t r = 0; r < p; ++r)
        if (held[static_cast<size_t>(r)][u] != value(schedule.root) + u)
          return "rank " + std::to_string(r) + " lacks the root's unit " + std::to_string(u);
    } else if (held[static_cast<size_t>(schedule.root)][u] != total + static_cast<uint64_t>(p) * u) {
      return "the root has a wrong sum on unit " + std::to_string(u);
    }
  }
  return "";
}

// The broadcast down the switch tree: from every root of random trees, whole and pipelined,
// it verifies and replays (and its transpose, the reduce); the root's own switch gets the data
// in the first step's star from the root itself.
TEST(PlannerCollectives, SwitchTreeBroadcastFollowsTheSwitchesFromTheRoot) {
  testing::RandomTrees trees(0x5B70AD);
  int checked = 0;
  for (int t = 0; t < 60; ++t) {
    const Topology topo = trees.next(t % 6 == 0 ? 90 : 30);
    const int32_t p = topo.num_learners();
    for (const int32_t root : {0, p - 1, p / 2})
      for (const char* name : {"switch-tree", "switch-tree@4", "switch-binary-tree@2", "switch-chain-tree@8"})
        for (const ir::Collective collective : {ir::Collective::Broadcast, ir::Collective::Reduce}) {
          const ir::Schedule schedule = plan_collective_algorithm(topo, collective, name, root);
          EXPECT_NO_THROW(ir::verify_schedule(schedule, p)) << topo.name() << " " << name << " root " << root;
          const ir::Schedule whole = ir::materialize(schedule);
          EXPECT_EQ(rooted_replay_error(whole, p), "") << topo.name() << " " << name << " root " << root;
          if (collective == ir::Collective::Broadcast && p > 1) {
            ASSERT_FALSE(whole.steps.empty());
            bool from_root = false;
            for (const ir::Op& op : whole.steps[0].ops) from_root |= op.root == root;
            EXPECT_TRUE(from_root) << topo.name() << " root " << root;
          }
          ++checked;
        }
  }
  EXPECT_EQ(checked, 60 * 3 * 4 * 2);

  // Raced beside the chain and the binomial tree (every slicing), the plan's broadcast is never
  // dearer with them (the race keeps the cheapest row at each size), and cheaper at 64 KiB and
  // 1 MiB on more than half of the random trees of more than one switch (the check that carries
  // the test).
  std::vector<std::string> without{"chain", "binomial-tree"};
  for (const uint32_t slices : kPipelineSlices)
    if (slices <= 64) without.push_back(fmt::format("binomial-tree@{}", slices));
  std::vector<std::string> with = without;
  for (const char* name : {"switch-tree", "switch-binary-tree", "switch-chain-tree"}) {
    with.push_back(name);
    for (const uint32_t slices : kPipelineSlices)
      if (slices <= 64) with.push_back(fmt::format("{}@{}", name, slices));
  }
  CostParams cost;
  cost.hop_overhead = kMeasuredHopOverhead;
  testing::RandomTrees more(0x5B70AE);
  int cheaper = 0, trees_priced = 0;
  for (int t = 0; t < 40; ++t) {
    const Topology topo = more.next(40);
    if (machines_of(topo).size() == 1) continue;  // (one switch: the switch trees are left out)
    const CollectivePlan before = plan_collective(topo, ir::Collective::Broadcast, 0, without, cost);
    const CollectivePlan after = plan_collective(topo, ir::Collective::Broadcast, 0, with, cost);
    for (const double bytes : {8.0, 65536.0, 1048576.0, 268435456.0}) {
      const double b = before.chosen(static_cast<uint64_t>(bytes)).cost.at(bytes);
      const double a = after.chosen(static_cast<uint64_t>(bytes)).cost.at(bytes);
      EXPECT_LE(a, b * (1 + 1e-12)) << topo.name() << " at " << bytes;
      if (bytes == 65536.0 || bytes == 1048576.0) cheaper += a < 0.95 * b;
    }
    ++trees_priced;
  }
  EXPECT_GE(trees_priced, 20);
  EXPECT_GT(cheaper, trees_priced);  // more than half of the 2 x trees_priced (size, tree) pairs
}

TEST(PlannerCollectives, RelayTreeStaysSmallAtLargeP) {
  testing::TreeBuilder b("large");
  std::mt19937_64 rng(38);
  std::uniform_int_distribution<int> gpus(1, 8), machines(6, 20);
  for (int z = 0; b.learners() < 64000; ++z) {
    const NodeId zone = b.add_switch(b.root(), "zone" + std::to_string(z), {100e9, 3e-6});
    for (int pod = 0; pod < 8 && b.learners() < 64000; ++pod) {
      const NodeId p = b.add_switch(zone, "pod" + std::to_string(pod), {50e9, 2e-6});
      for (int rack = 0; rack < 8 && b.learners() < 64000; ++rack) {
        const NodeId r = b.add_switch(p, "rack" + std::to_string(rack), {25e9, 2e-6});
        for (int m = machines(rng); m > 0; --m) {
          const NodeId machine = b.add_switch(r, "m" + std::to_string(m), {12.5e9, 5e-6});
          for (int g = gpus(rng); g > 0; --g) b.add_learner(machine, "gpu" + std::to_string(g), {12e9, 2e-6});
        }
      }
    }
  }
  const Topology topo = b.build();
  const RelayTreeSize size = relay_tree_size(topo);
  EXPECT_TRUE(schedule_fits_limits({size.ops, size.members}));
  const ir::Schedule schedule = plan_relay_tree_allgather(topo);
  uint64_t ops = 0, members = 0;
  for (const ir::Step& step : schedule.steps)
    for (const ir::Op& op : step.ops) {
      ++ops;
      members += op.group.size();
    }
  EXPECT_LE(ops, size.ops);
  EXPECT_LE(members, size.members);
  EXPECT_LT(ops, 4 * static_cast<uint64_t>(topo.num_learners()));
  EXPECT_LE(schedule.steps.size(), static_cast<size_t>(3 * topo.num_levels()));
  // relay-machines too: its chains grow by the machines' learners, its ops do not.
  const RelayTreeSize through = relay_tree_size(topo, true);
  EXPECT_TRUE(schedule_fits_limits({through.ops, through.members}));
  const ir::Schedule through_machines = plan_relay_tree_allgather(topo, true);
  uint64_t machine_ops = 0, machine_members = 0;
  for (const ir::Step& step : through_machines.steps)
    for (const ir::Op& op : step.ops) {
      ++machine_ops;
      machine_members += op.group.size();
    }
  EXPECT_LE(machine_ops, through.ops);
  EXPECT_LE(machine_members, through.members);
  EXPECT_GT(machine_members, members);
}

// On racks of multi-learner machines under NICs slower than the machines' own links,
// relay-machines brings the outside data into a machine in its rack's step: at 256 MiB it is
// cheaper than relay-stars, whose machines' own step moves nearly all the data again; at 64 KiB
// its longer chains (a chunk through every learner) cost more.
TEST(PlannerCollectives, RelayMachinesSavesTheMachinesStepAtLargeSizes) {
  testing::TreeBuilder b("racks");
  for (int pod = 0; pod < 2; ++pod) {
    const NodeId p = b.add_switch(b.root(), "pod" + std::to_string(pod), {50e9, 2e-6});
    for (int rack = 0; rack < 3; ++rack) {
      const NodeId r = b.add_switch(p, "rack" + std::to_string(rack), {25e9, 2e-6});
      for (int m = 0; m < 4; ++m) {
        const NodeId machine = b.add_switch(r, "m" + std::to_string(m), {3.125e9, 5e-6});
        for (int g = 0; g < 4; ++g) b.add_learner(machine, "gpu" + std::to_string(g), {12e9, 2e-6});
      }
    }
  }
  const Topology topo = b.build();
  const ScheduleCost relay =
      evaluate_schedule(topo, plan_collective_algorithm(topo, ir::Collective::AllGather, "relay-stars"));
  const ScheduleCost machines =
      evaluate_schedule(topo, plan_collective_algorithm(topo, ir::Collective::AllGather, "relay-machines"));
  EXPECT_LT(machines.at(268435456.0), 0.95 * relay.at(268435456.0));
  EXPECT_GT(machines.at(65536.0), relay.at(65536.0));
}

}  // namespace
}  // namespace flexplan
